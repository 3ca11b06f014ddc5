// The one way distributed code includes Boost.Asio.
// Note [Asio include]: Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>, which g++ 12 in C++20 mode rejects; include it first. Include this header
// only from .cpp files: Asio is heavy and stays out of public headers.
#pragma once
#include <utility>

#include <boost/asio.hpp>
