// ember::native ops behind nn's layers, losses, optimizers and clip_grad: their fused kernels.
// Each checks its arguments, allocates, and dispatches on device
// (CPU kernels in core/kernels/cpu/; a device without a kernel yet is a NotImplementedError
// naming the op). No autograd: the nodes of autograd/functions/ call these. Thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kernels/optim.h"
#include "core/kernels/rnn_cell.h"
#include "core/tensor.h"

namespace ember::native {

// ---- class-index losses (see Note [Class-index loss kernels] in core/ops/class_loss.cpp) ------

struct ClassLossForward {
  Tensor loss;               // [N * S] float64 per-element losses, 0 where the target is ignored
  Tensor lse;                // [N * S] float64 row log-sum-exp (cross_entropy only)
  double sum = 0.0;          // sum of `loss` in element order
  double total_weight = 0.0; // sum of w[target] over the elements not ignored
};

/// cross_entropy over logits (`from_logits`, log_softmax fused) or nll_loss over
/// log-probabilities. input [N, C, d...] or [C] (float32/float64), target int64/int32 of the
/// input's shape without C, weight [C] or undefined. IndexError for a target outside [0, C)
/// that is not ignore_index. Shapes are the caller's to check (nn::functional words the errors).
ClassLossForward class_loss_forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                                    int64_t ignore_index, double label_smoothing, bool from_logits);
/// d loss / d input (shape input_sizes, dtype): grad_elem (the per-element loss gradient,
/// [N * S]) or, when undefined, grad_scalar for every element. cross_entropy reads the
/// forward's `logits` and `lse`; nll_loss reads neither (pass undefined tensors).
Tensor class_loss_backward(const IntList& input_sizes, DType dtype, const Tensor& logits, const Tensor& target,
                           const Tensor& weight, const Tensor& lse, const Tensor& grad_elem, double grad_scalar,
                           int64_t ignore_index, double label_smoothing, bool from_logits);

// ---- norms over many tensors (clip_grad_norm_) -------------------------------------------------

/// The norm_type-norm of all elements of all `tensors` together (inf: max |x|, -inf: min |x|),
/// accumulated in double; the CPU tensors in one parallel pass over all of them, the same result
/// on any thread count (Note [One pass over many tensors] in core/kernels/cpu/norm.cpp). 0 for
/// no elements. CUDA tensors of one
/// device are reduced by one CUB reduction over all of them, read back once (Note [Multi-tensor
/// launches] in core/kernels/multi_tensor.h); tensors may be on several devices.
double total_norm(const std::vector<Tensor>& tensors, double norm_type);
/// t *= scale for every tensor (bumps their versions): one parallel pass over all contiguous
/// float32/float64 CPU tensors together, one multi-tensor launch per CUDA device for such
/// CUDA tensors, an element-wise mul_ for any other.
void scale_all_(const std::vector<Tensor>& tensors, double scale);

// ---- embedding, layer_norm, row gathers ----------------------------------------------------------

/// weight [num, dim] rows picked by `indices` (int64/int32, any shape): [*indices.sizes(), dim].
/// IndexError for an index outside [0, num); TypeError for other index dtypes.
Tensor embedding_forward(const Tensor& weight, const Tensor& indices);
/// The weight gradient [num_weights, dim] (dtype, device): rows of `grad` summed per index in
/// index order, the padding_idx row (-1: none) left zero.
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx,
                          DType dtype, Device device);

struct LayerNormForward {
  Tensor y;           // the input's shape and dtype
  Tensor mean, rstd;  // [M] float64 per-row statistics for the backward
};
/// input viewed as [M, N] rows (N: the normalized numel); weight, bias of N elements or
/// undefined, of the input's dtype and device (TypeError otherwise).
LayerNormForward layer_norm_forward(const Tensor& input, int64_t M, int64_t N, const Tensor& weight,
                                    const Tensor& bias, double eps);
/// Gradients of (input, weight, bias); entry i undefined when !needs[i].
std::vector<Tensor> layer_norm_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                        const Tensor& mean, const Tensor& rstd, int64_t M, int64_t N,
                                        const std::vector<bool>& needs);

/// src viewed as [num_src_rows, C]: out row i = src row index[i], or `fill` where index[i] is
/// -1; shaped out_sizes (numel index.size() * C). Index entries outside [-1, num_src_rows) are
/// internal errors (callers build them).
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& index, int64_t num_src_rows,
                   const IntList& out_sizes, double fill);

// ---- optimizer updates (math: core/kernels/optim.h) ----------------------------------------------

/// One Adam (a.decoupled: AdamW) step of every params[i] in place, in torch's
/// _single_tensor_adam op order with every op rounded to the parameter's dtype; steps[i] is
/// params[i]'s step count after this step (1 for the first; a.step is not read).
/// max_exp_avg_sqs empty: no AMSGrad; otherwise every list has params.size() entries, each of
/// its parameter's shape. Contiguous float32/float64 tensors with their state alike run the
/// fused kernel: on CPU per tensor, on CUDA one multi-tensor launch per (device, dtype) (Note
/// [Multi-tensor launches] in core/kernels/multi_tensor.h); anything else the same formula as
/// tensor ops. Bumps the versions of what it writes. ValueError for lists of unequal length.
void adam_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                  const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& steps,
                  const kernels::AdamArgs& a);
/// One SGD step of every params[i] in place (torch's `_single_tensor_sgd` op order);
/// momentum_buffers empty: no momentum; otherwise init_buffers[i]: that buffer's first step (it
/// takes the gradient itself). Fused paths and errors as adam_update_.
void sgd_update_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& init_buffers,
                 const kernels::SgdArgs& a);

// ---- recurrent layers over packed rows (Note [RNN step buffers] in core/kernels/cpu/rnn_layer.cpp) --

using kernels::RnnMode;

/// Gate blocks per hidden unit: LSTM 4 (i, f, g, o), GRU 3 (r, z, n), RNN 1.
constexpr int64_t gate_count(RnnMode m) { return m == RnnMode::kLstm ? 4 : m == RnnMode::kGru ? 3 : 1; }
const char* rnn_mode_name(RnnMode m);  // "LSTM", "GRU", "RNN_TANH", "RNN_RELU"

/// The time structure of packed data: batch_sizes[t] active rows at step t, starting at row
/// offsets[t]; batch_sizes is positive and non-increasing.
struct PackedSteps {
  std::vector<int64_t> batch_sizes;
  std::vector<int64_t> offsets;
  int64_t num_rows = 0;
  /// Builds offsets and num_rows; throws ValueError for sizes that are not positive non-increasing.
  static std::shared_ptr<const PackedSteps> make(std::vector<int64_t> batch_sizes);
};

/// What one direction of a layer keeps for backward.
struct RnnDirectionSaved {
  Tensor gates;  // [N, G*H] activations
  Tensor gh;     // GRU: [N, 3H]
  Tensor hprev;  // [N, H]
  Tensor cprev;  // LSTM: [N, H]
  Tensor tanhc;  // LSTM: [N, H]
};

struct RnnLayerForward {
  Tensor output;  // [N, D*H]: direction d in columns [d*H, (d+1)*H)
  Tensor h_n;     // [D, B, H]
  Tensor c_n;     // LSTM: [D, B, H]; undefined otherwise
  std::vector<RnnDirectionSaved> saved;  // one per direction
};

/// input [N, F] (packed rows); h0, c0 [D, B, H] (c0 LSTM only, else undefined) with
/// B = batch_sizes[0]; weights: for each direction {w_ih [G*H, F], w_hh [G*H, H], b_ih [G*H],
/// b_hh [G*H]} with undefined biases when the layer has none. float32 or float64.
/// Shapes and dtypes are the caller's (nn::RNNBase) to check; mismatches are internal errors;
/// a device without a kernel is a NotImplementedError.
RnnLayerForward rnn_layer_forward(RnnMode mode, const Tensor& input, const PackedSteps& steps, const Tensor& h0,
                                  const Tensor& c0, const std::vector<Tensor>& weights);

/// How many times rnn_layer_forward has run in this process (all threads), like
/// cudnn_rnn_forward_count: shows which RNN backend ran where no autograd node records it.
uint64_t rnn_layer_forward_count();

/// Gradients of (input, h0, c0, then per direction w_ih, w_hh, b_ih, b_hh) from those of
/// (output, h_n, c_n) (any may be undefined: zero); entry i stays undefined when !needs[i].
std::vector<Tensor> rnn_layer_backward(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<RnnDirectionSaved>& saved, const Tensor& d_output,
                                       const Tensor& d_h_n, const Tensor& d_c_n, const std::vector<bool>& needs);

// ---- the cuDNN RNN: the whole stack in one call (Note [cuDNN RNN] in core/kernels/cuda/cudnn_rnn.cpp)

struct CudnnRnnConfig {
  RnnMode mode = RnnMode::kLstm;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bidirectional = false, bias = true;
  double dropout = 0.0;  // between layers, applied when training
  bool training = false;
};

/// Whether the cuDNN RNN is allowed: EMBER_CUDNN=0 in the environment turns it off (read once);
/// set_cudnn_enabled overrides that for the process (tests compare both paths).
bool cudnn_enabled();
void set_cudnn_enabled(bool on);
/// True when `input` (packed rows [N, F]) can run through cuDNN: its device has a kernel for
/// cudnn_rnn_forward (CUDA, built with cuDNN), cudnn_enabled(), float32/float64, and every
/// size fits cuDNN's int range.
bool cudnn_rnn_usable(const CudnnRnnConfig& c, const Tensor& input);
/// How many times cudnn_rnn_forward has run in this process (all threads): shows which RNN
/// backend ran where no autograd node records it (under NoGradGuard, in eval).
uint64_t cudnn_rnn_forward_count();

/// What the cuDNN backward needs from its forward.
struct CudnnRnnSaved {
  Tensor weight_space;        // the parameters' own flat buffer (a view at its start) or a packed copy
  size_t weight_space_bytes = 0;
  std::vector<int64_t> gate_offsets;  // cuDNN's layout (native::rnn_gate_offsets form)
  Tensor reserve;             // cuDNN's reserve space (training)
  size_t reserve_bytes = 0;
  Tensor dev_seq_lengths;     // int32 [B] on the device
  std::vector<int32_t> seq_lengths;  // the same on the host
  int64_t max_seq_length = 0;
  Tensor dropout_states;      // the device's states (undefined without dropout)
  uint64_t dropout_seed = 0;
  double dropout = 0.0;       // p as applied (0 when not training)
};

/// Marks the buffers of `s` that a backward hands to cuDNN (weight space, reserve space, device
/// sequence lengths) as used by the work queued on `stream` (Tensor::record_stream), so that
/// once freed they are not reused before that work is done. cudnn_rnn_backward calls it with its
/// current stream (Note [cuDNN RNN streams] in core/kernels/cuda/cudnn_rnn.cpp); a no-op for buffers
/// allocated on `stream` and for devices without events.
void cudnn_rnn_record_stream(const CudnnRnnSaved& s, Stream stream);

struct CudnnRnnForward {
  Tensor output;  // [N, D*H]
  Tensor h_n;     // [L*D, B, H]
  Tensor c_n;     // LSTM: [L*D, B, H]
  CudnnRnnSaved saved;
};

/// The stack of c.num_layers layers over packed rows `input` [N, F] (steps: its batch sizes)
/// through cudnnRNNForward. h0, c0: [L*D, B, H] (c0 LSTM only); weights: the module's
/// parameters in registration order (Note [RNN flat weights]). need_backward: keep the reserve
/// space for cudnn_rnn_backward. Preconditions: cudnn_rnn_usable, shapes checked by the caller.
CudnnRnnForward cudnn_rnn_forward(const CudnnRnnConfig& c, const Tensor& input, const PackedSteps& steps,
                                  const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                  bool need_backward);

struct CudnnRnnGrads {
  Tensor d_input, d_h0, d_c0;
  std::vector<Tensor> d_weights;  // one per weight, shaped like it (empty unless wanted)
};

/// cudnnRNNBackwardData_v8 then (when need_weights) cudnnRNNBackwardWeights_v8. d_output,
/// d_h_n, d_c_n may be undefined (zero).
CudnnRnnGrads cudnn_rnn_backward(const CudnnRnnConfig& c, const CudnnRnnSaved& saved, const Tensor& input,
                                 const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                 const Tensor& output, const Tensor& d_output, const Tensor& d_h_n,
                                 const Tensor& d_c_n, bool need_weights);

}  // namespace ember::native
