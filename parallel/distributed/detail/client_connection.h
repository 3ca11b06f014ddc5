// ClientConnection: one blocking TCP connection to a TCPStoreServer in which every
// operation has a deadline. Asio stays inside the .cpp. Not thread-safe: TCPStore hands
// each connection to one thread at a time (see its connection pool).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::parallel::detail {

class ClientConnection {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Result {
    kOk,
    kTimeout,  // the deadline passed; the connection is now closed
    kClosed,   // connect refused, connection lost or reset; message() says why
  };

  ClientConnection();
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  /// Resolves host and tries each address once, giving up at deadline.
  Result connect(const std::string& host, uint16_t port, Clock::time_point deadline);
  /// connect(), tried again (10 ms doubling to 500 ms apart) while refused, until deadline:
  /// the server may not listen yet. kClosed only when the deadline passed between tries.
  Result connect_retrying(const std::string& host, uint16_t port, Clock::time_point deadline);
  /// Sends one frame (as built by FrameWriter) and reads the response payload.
  Result request(const std::vector<uint8_t>& frame, std::vector<uint8_t>& response,
                 Clock::time_point deadline);
  /// Raw bytes, for peers that speak another framing (PyTorch's TCPStore): writes all n
  /// bytes, or reads exactly n bytes (`got`, when given, says how many arrived before a
  /// failure), by the deadline.
  Result send(const uint8_t* data, size_t n, Clock::time_point deadline);
  Result receive(uint8_t* data, size_t n, Clock::time_point deadline, size_t* got = nullptr);
  /// What went wrong in the last call that did not return kOk.
  const std::string& message() const { return message_; }
  bool is_open() const;
  void close();

 private:
  Result raw_result(bool done, bool failed, bool eof, const std::string& why);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string message_;
};

}  // namespace ember::parallel::detail
