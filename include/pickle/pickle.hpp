#pragma once
/// pickle: move data between GPUs without stealing SMs. This header includes the whole public API.

#include <pickle/version.hpp>
#include <pickle/error.hpp>
#include <pickle/memory.hpp>
#include <pickle/bootstrap.hpp>
#include <pickle/stream.hpp>
#include <pickle/communicator.hpp>
