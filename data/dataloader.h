// DataLoader<Dataset, Collate>: iterates a dataset in batches, as torch.utils.data.DataLoader.
// `for (auto& batch : loader)` runs one epoch. With num_workers == 0 batches are made in the
// calling thread; otherwise by forked worker processes and handed back through shared memory
// without a copy, in sampler order (see data/detail/multiprocess_engine.h and
// Note [DataLoader workers]). Each epoch draws a 64-bit base seed from options.generator (or
// ember's default generator); worker i seeds ember's default CPU generator with base_seed + i,
// then runs worker_init_fn(i); get_worker_info() describes the worker inside it. With
// pin_memory=true batches arrive in pinned host memory (Note [Pinned batches] in
// data/detail/pin_batch.h).
// The loader and its iterators belong to one thread; an iterator must not outlive its loader.
// Dropping an iterator early reaps its workers (unless persistent) and frees its shared memory.
#pragma once
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/profiler.h"
#include "core/error.h"
#include "core/generator.h"
#include "data/batch_codec.h"
#include "data/batch_sampler.h"
#include "data/collate.h"
#include "data/dataloader_options.h"
#include "data/dataset.h"
#include "data/detail/multiprocess_engine.h"
#include "data/detail/pin_batch.h"
#include "data/random_sampler.h"
#include "data/sequential_sampler.h"

namespace ember::data {

template <typename DatasetT, typename CollateT = DefaultCollate>
  requires MapStyleDataset<DatasetT> || IterableStyleDataset<DatasetT>
class DataLoader {
 public:
  using Sample = typename DatasetT::SampleType;
  using Batch = std::decay_t<std::invoke_result_t<const CollateT&, std::vector<Sample>>>;
  static constexpr bool kIterable = IterableStyleDataset<DatasetT> && !MapStyleDataset<DatasetT>;

  /// Throws ValueError for inconsistent options (PyTorch's rules: sampler excludes shuffle,
  /// batch_sampler excludes batch_size/shuffle/sampler/drop_last, persistent_workers needs
  /// num_workers > 0, iterable datasets take no sampler or shuffle).
  DataLoader(std::shared_ptr<DatasetT> dataset, DataLoaderOptions options = {}, CollateT collate = {})
      : dataset_(std::move(dataset)), options_(std::move(options)), collate_(std::move(collate)) {
    validate();
    pin_ = detail::pin_memory_enabled(options_.pin_memory);
  }
  template <typename D = DatasetT>
    requires std::is_move_constructible_v<D> && (!std::is_abstract_v<D>)
  explicit DataLoader(DatasetT dataset, DataLoaderOptions options = {}, CollateT collate = {})
      : DataLoader(std::make_shared<DatasetT>(std::move(dataset)), std::move(options), std::move(collate)) {}

  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Iterator;
  /// Starts an epoch (forking workers unless they persist) and loads its first batch.
  Iterator begin() { return Iterator(std::make_unique<Epoch>(*this)); }
  std::default_sentinel_t end() const { return {}; }

  /// Batches per epoch. Throws TypeError for an IterableDataset (its length is unknown).
  size_t size() const {
    if constexpr (kIterable) {
      EMBER_THROW(TypeError, "DataLoader: a loader over an IterableDataset has no size()");
    } else {
      return batch_sampler_->size();
    }
  }
  const DataLoaderOptions& options() const { return options_; }
  /// Whether batches are delivered in pinned memory: pin_memory=true and a CUDA device visible
  /// (Note [Pinned batches]).
  bool pins_memory() const { return pin_; }
  DatasetT& dataset() { return *dataset_; }
  /// Process ids of the persistent workers (empty when none are running).
  std::vector<pid_t> persistent_worker_pids() const {
    return persistent_ ? persistent_->worker_pids() : std::vector<pid_t>{};
  }

  class Epoch {
   public:
    explicit Epoch(DataLoader& loader) : loader_(loader) {
      auto& o = loader_.options_;
      Generator& seed_gen = o.generator ? *o.generator : default_generator();
      const uint64_t base_seed = seed_gen.next_u64();
      if constexpr (!kIterable) batches_ = loader_.batch_sampler_->batches();
      if (o.num_workers == 0) {
        if constexpr (kIterable) loader_.dataset_->reset();
        return;
      }
      if (o.persistent_workers) {
        EMBER_CHECK(!loader_.persistent_busy_, "DataLoader: persistent workers serve one iterator at a time; "
                                               "finish or drop the previous iterator first");
        if (!loader_.persistent_) loader_.persistent_ = loader_.make_engine();
        engine_ = loader_.persistent_.get();
        loader_.persistent_busy_ = true;
      } else {
        owned_ = loader_.make_engine();
        engine_ = owned_.get();
      }
      try {
        if (!engine_->started()) engine_->start(base_seed);
        engine_->begin_epoch(std::move(batches_));
      } catch (...) {
        finish();
        throw;
      }
    }
    ~Epoch() { finish(); }
    Epoch(const Epoch&) = delete;
    Epoch& operator=(const Epoch&) = delete;

    /// The next batch, or std::nullopt at the end of the epoch.
    std::optional<Batch> next() {
      EMBER_PROFILE_SCOPE("DataLoader.next", kDataLoader);
      std::optional<Batch> b = next_unpinned();
      if (b && loader_.pin_) return detail::pin_batch(*b);
      return b;
    }

    /// Releases the workers: kept for the next epoch when persistent, else reaped.
    void finish() noexcept {
      done_ = true;
      if (engine_ == nullptr) return;
      if (owned_) {
        owned_->shutdown();
        owned_.reset();
      } else {
        try {
          engine_->end_epoch(/*keep_workers=*/true);
        } catch (...) {
          engine_->shutdown();
        }
        loader_.persistent_busy_ = false;
      }
      engine_ = nullptr;
    }

   private:
    std::optional<Batch> next_unpinned() {
      if (engine_ != nullptr) {
        std::optional<detail::RawBatch> raw = engine_->next();
        if (!raw) {
          finish();
          return std::nullopt;
        }
        return decode_batch<Batch>(std::move(raw->tensors), raw->meta);
      }
      if (done_) return std::nullopt;
      if constexpr (kIterable) {
        auto b = fetch_iterable(*loader_.dataset_, loader_.collate_, loader_.options_);
        if (!b) done_ = true;
        return b;
      } else {
        if (position_ >= batches_.size()) {
          done_ = true;
          return std::nullopt;
        }
        return fetch_map(*loader_.dataset_, loader_.collate_, batches_[position_++]);
      }
    }

    DataLoader& loader_;
    std::vector<std::vector<size_t>> batches_;
    size_t position_ = 0;
    bool done_ = false;
    std::unique_ptr<detail::MultiprocessEngine> owned_;
    detail::MultiprocessEngine* engine_ = nullptr;
  };

  /// A move-only input iterator over one epoch; compares equal to end() when exhausted.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::input_iterator_tag;

    explicit Iterator(std::unique_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { advance(); }
    Iterator(Iterator&&) noexcept = default;
    Iterator& operator=(Iterator&&) noexcept = default;

    Batch& operator*() const { return *current_; }
    Batch* operator->() const { return &*current_; }
    Iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    void advance() {
      current_.reset();
      current_ = epoch_->next();
    }
    std::unique_ptr<Epoch> epoch_;
    mutable std::optional<Batch> current_;
  };

 private:
  static Batch fetch_map(DatasetT& ds, const CollateT& collate, const std::vector<size_t>& indices) {
    std::vector<Sample> samples;
    samples.reserve(indices.size());
    for (size_t i : indices) samples.push_back(ds.get(i));
    return collate(std::move(samples));
  }

  // One batch from the stream; std::nullopt when it has nothing left (or only a short batch
  // and drop_last). Leaves `exhausted` set once the stream has ended.
  static std::optional<Batch> fetch_iterable(DatasetT& ds, const CollateT& collate, const DataLoaderOptions& o,
                                             bool* exhausted = nullptr) {
    std::vector<Sample> samples;
    samples.reserve(o.batch_size);
    while (samples.size() < o.batch_size) {
      std::optional<Sample> s = ds.next();
      if (!s) {
        if (exhausted) *exhausted = true;
        break;
      }
      samples.push_back(std::move(*s));
    }
    if (samples.empty() || (o.drop_last && samples.size() < o.batch_size)) return std::nullopt;
    return collate(std::move(samples));
  }

  std::unique_ptr<detail::MultiprocessEngine> make_engine() {
    detail::EngineOptions eo;
    eo.num_workers = options_.num_workers;
    eo.prefetch_factor = options_.prefetch_factor;
    eo.timeout_ms = options_.timeout_ms;
    eo.iterable = kIterable;
    detail::WorkerBody body;
    // The body runs only in the forked worker, on the worker's copy of everything captured.
    body.init = options_.worker_init_fn;
    std::shared_ptr<DatasetT> ds = dataset_;
    CollateT collate = collate_;
    if constexpr (kIterable) {
      auto exhausted = std::make_shared<bool>(false);
      DataLoaderOptions o = options_;
      body.reset = [ds, exhausted] {
        *exhausted = false;
        ds->reset();
      };
      body.fetch = [ds, collate, o, exhausted](const std::vector<size_t>&) -> std::optional<BatchEncoder> {
        if (*exhausted) return std::nullopt;
        std::optional<Batch> b = fetch_iterable(*ds, collate, o, exhausted.get());
        if (!b) {
          *exhausted = true;
          return std::nullopt;
        }
        return encode_batch(*b);
      };
    } else {
      body.fetch = [ds, collate](const std::vector<size_t>& indices) -> std::optional<BatchEncoder> {
        return encode_batch(fetch_map(*ds, collate, indices));
      };
    }
    return std::make_unique<detail::MultiprocessEngine>(eo, static_cast<void*>(dataset_.get()), std::move(body));
  }

  void validate() {
    auto& o = options_;
    EMBER_CHECK_T(ValueError, dataset_ != nullptr, "DataLoader: dataset must not be null");
    EMBER_CHECK_T(ValueError, o.num_workers >= 0,
                  "DataLoader: num_workers option should be non-negative; use num_workers=0 to disable "
                  "multiprocessing, got ", o.num_workers);
    EMBER_CHECK_T(ValueError, o.timeout_ms >= 0, "DataLoader: timeout_ms option should be non-negative, got ",
                  o.timeout_ms);
    EMBER_CHECK_T(ValueError, o.num_workers == 0 || o.prefetch_factor > 0,
                  "DataLoader: prefetch_factor option should be positive, got ", o.prefetch_factor);
    EMBER_CHECK_T(ValueError, !o.persistent_workers || o.num_workers > 0,
                  "DataLoader: persistent_workers option needs num_workers > 0");
    EMBER_CHECK_T(ValueError, o.batch_size > 0 || o.batch_sampler,
                  "DataLoader: batch_size should be a positive integer value, but got batch_size=0");
    if constexpr (kIterable) {
      EMBER_CHECK_T(ValueError, !o.shuffle && !o.sampler && !o.batch_sampler,
                    "DataLoader with IterableDataset: expected unspecified shuffle, sampler and batch_sampler");
    } else {
      if (o.batch_sampler) {
        EMBER_CHECK_T(ValueError, o.batch_size == 1 && !o.shuffle && !o.sampler && !o.drop_last,
                      "DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                      "and drop_last");
        batch_sampler_ = o.batch_sampler;
      } else {
        EMBER_CHECK_T(ValueError, !(o.sampler && o.shuffle),
                      "DataLoader: sampler option is mutually exclusive with shuffle");
        std::shared_ptr<Sampler> sampler = o.sampler;
        const size_t n = dataset_->size();
        if (!sampler) {
          if (o.shuffle) {
            sampler = std::make_shared<RandomSampler>(n, false, std::nullopt, o.generator);
          } else {
            sampler = std::make_shared<SequentialSampler>(n);
          }
        }
        batch_sampler_ = std::make_shared<BatchSampler>(sampler, o.batch_size, o.drop_last);
      }
    }
  }

  std::shared_ptr<DatasetT> dataset_;
  DataLoaderOptions options_;
  CollateT collate_;
  std::shared_ptr<BatchSampler> batch_sampler_;
  std::unique_ptr<detail::MultiprocessEngine> persistent_;
  bool persistent_busy_ = false;
  bool pin_ = false;  // see pins_memory()
};

}  // namespace ember::data
