#include "parallel/distributed/detail/client_connection.h"

#include <thread>

#include "parallel/distributed/detail/asio.h"

#include "parallel/distributed/detail/wire.h"

namespace ember::parallel::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
// Responses come from an authenticated server; the cap only guards against a confused peer.
constexpr uint32_t kMaxResponseBytes = 1u << 30;
}  // namespace

struct ClientConnection::Impl {
  asio::io_context io;
  tcp::socket socket{io};

  // Runs the started asynchronous operation until it completes or the deadline passes;
  // on a timeout closes the socket and lets the aborted handlers finish.
  bool run_until(Clock::time_point deadline) {
    io.restart();
    io.run_until(deadline);
    if (io.stopped()) return true;
    boost::system::error_code ignored;
    socket.close(ignored);
    io.restart();
    io.run();
    return false;
  }
};

ClientConnection::ClientConnection() : impl_(std::make_unique<Impl>()) {}
ClientConnection::~ClientConnection() = default;

bool ClientConnection::is_open() const { return impl_->socket.is_open(); }

void ClientConnection::close() {
  boost::system::error_code ignored;
  impl_->socket.close(ignored);
}

ClientConnection::Result ClientConnection::connect(const std::string& host, uint16_t port,
                                                   Clock::time_point deadline) {
  close();
  tcp::resolver resolver(impl_->io);
  boost::system::error_code result = asio::error::would_block;
  resolver.async_resolve(host, std::to_string(port),
                         [&](const boost::system::error_code& ec, tcp::resolver::results_type eps) {
                           if (ec) {
                             result = ec;
                             return;
                           }
                           asio::async_connect(impl_->socket, eps,
                                               [&](const boost::system::error_code& ec2,
                                                   const tcp::endpoint&) { result = ec2; });
                         });
  if (!impl_->run_until(deadline)) {
    resolver.cancel();
    message_ = "timed out connecting";
    return Result::kTimeout;
  }
  if (result) {
    close();
    message_ = result.message();
    return Result::kClosed;
  }
  boost::system::error_code ignored;
  impl_->socket.set_option(tcp::no_delay(true), ignored);
  return Result::kOk;
}

ClientConnection::Result ClientConnection::connect_retrying(const std::string& host, uint16_t port,
                                                            Clock::time_point deadline) {
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    const Result r = connect(host, port, deadline);
    if (r != Result::kClosed || Clock::now() >= deadline) return r;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

ClientConnection::Result ClientConnection::request(const std::vector<uint8_t>& frame,
                                                   std::vector<uint8_t>& response,
                                                   Clock::time_point deadline) {
  if (!is_open()) {
    message_ = "connection is closed";
    return Result::kClosed;
  }
  boost::system::error_code result = asio::error::would_block;
  uint8_t header[kFrameHeaderBytes];
  auto& sock = impl_->socket;
  asio::async_write(sock, asio::buffer(frame), [&](const boost::system::error_code& ec, size_t) {
    if (ec) {
      result = ec;
      return;
    }
    asio::async_read(sock, asio::buffer(header), [&](const boost::system::error_code& ec2, size_t) {
      if (ec2) {
        result = ec2;
        return;
      }
      const uint32_t len = decode_u32(header);
      if (len == 0 || len > kMaxResponseBytes) {
        result = asio::error::message_size;
        return;
      }
      response.resize(len);
      asio::async_read(sock, asio::buffer(response),
                       [&](const boost::system::error_code& ec3, size_t) { result = ec3; });
    });
  });
  if (!impl_->run_until(deadline)) {
    message_ = "timed out";
    return Result::kTimeout;
  }
  if (result) {
    close();
    message_ = result == asio::error::eof ? std::string("the server closed the connection")
                                          : result.message();
    return Result::kClosed;
  }
  return Result::kOk;
}

// The outcome of a raw send/receive: the deadline passed (run_until closed the socket),
// the peer closed or reset the connection, or done.
ClientConnection::Result ClientConnection::raw_result(bool done, bool failed, bool eof, const std::string& why) {
  if (!done) {
    message_ = "timed out";
    return Result::kTimeout;
  }
  if (failed) {
    close();
    message_ = eof ? std::string("the server closed the connection") : why;
    return Result::kClosed;
  }
  return Result::kOk;
}

ClientConnection::Result ClientConnection::send(const uint8_t* data, size_t n, Clock::time_point deadline) {
  if (!is_open()) {
    message_ = "connection is closed";
    return Result::kClosed;
  }
  boost::system::error_code result = asio::error::would_block;
  asio::async_write(impl_->socket, asio::buffer(data, n),
                    [&](const boost::system::error_code& ec, size_t) { result = ec; });
  const bool done = impl_->run_until(deadline);
  return raw_result(done, bool(result), result == asio::error::eof, result.message());
}

ClientConnection::Result ClientConnection::receive(uint8_t* data, size_t n, Clock::time_point deadline,
                                                   size_t* got) {
  if (got != nullptr) *got = 0;
  if (!is_open()) {
    message_ = "connection is closed";
    return Result::kClosed;
  }
  boost::system::error_code result = asio::error::would_block;
  size_t transferred = 0;
  asio::async_read(impl_->socket, asio::buffer(data, n), [&](const boost::system::error_code& ec, size_t k) {
    result = ec;
    transferred = k;
  });
  const bool done = impl_->run_until(deadline);
  if (got != nullptr) *got = transferred;
  return raw_result(done, bool(result), result == asio::error::eof, result.message());
}

}  // namespace ember::parallel::detail
