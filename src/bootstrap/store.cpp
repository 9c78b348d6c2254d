// pickle::Store: the public face of the bootstrap store. Rank 0 owns the server; every rank owns a client.
// This file checks arguments, names operations for error messages and keeps the per-name collective counters.

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <variant>

#include <pickle/bootstrap.hpp>
#include <pickle/error.hpp>

#include "bootstrap/store_client.hpp"
#include "bootstrap/store_server.hpp"
#include "bootstrap/token.hpp"
#include "core/clock.hpp"
#include "core/env.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

namespace pickle {

using bootstrap::kMaxKeyBytes;
using bootstrap::kMaxValueBytes;

struct Store::Impl {
  RankInfo self;
  double timeout_seconds = 0;
  std::string token;
  // Declared before the clients so that it is destroyed after them: rank 0's clients say Bye to a live server.
  std::unique_ptr<bootstrap::StoreServer> server;
  std::unique_ptr<bootstrap::StoreClient> client;  // the rank's first connection (Hello): its loss is the rank's

  std::mutex mutex;  // guards everything below
  bool client_busy = false;
  // Further connections (Attach), idle. A connection carries one request at a time, so a call that finds the first
  // one busy (another thread waits in a get, wait or barrier there) takes one of these, or opens one: threads never
  // queue behind each other's waits. The pool grows to the most calls ever in flight at once.
  std::vector<std::unique_ptr<bootstrap::StoreClient>> spare;
  std::map<std::string, std::uint64_t> barrier_calls;  // how many times this rank entered each barrier name
  std::uint64_t allgather_calls = 0;
  std::atomic<bool> job_failed{false};  // mark_job_failed(): rank 0's server closes without waiting for the others

  std::string what(std::string_view op, std::uint64_t bytes = UINT64_MAX) const {
    return describe({.rank = self.rank, .op = op, .bytes = bytes});
  }
  bootstrap::Response call(const bootstrap::Request& request, const std::string& what_text) {
    std::unique_ptr<bootstrap::StoreClient> extra;
    bool first = false;
    {
      std::lock_guard lock(mutex);
      if (!client_busy) {
        client_busy = first = true;
      } else if (!spare.empty()) {
        extra = std::move(spare.back());
        spare.pop_back();
      }
    }
    if (first) {
      // Released however the call ends; a connection that broke stays broken and says so on the next call.
      struct Release {
        Impl& impl;
        ~Release() {
          std::lock_guard lock(impl.mutex);
          impl.client_busy = false;
        }
      } release{*this};
      return client->call(request, what_text);
    }
    if (!extra) {
      // The first connection broke (rank 0 went away): a further one would only find out the slow way.
      if (client->broken()) return client->call(request, what_text);  // throws, naming the earlier break
      extra = std::make_unique<bootstrap::StoreClient>(self, token, timeout_seconds,
                                                       bootstrap::StoreClient::Role::Attach);
    }
    struct Return {
      Impl& impl;
      std::unique_ptr<bootstrap::StoreClient>& connection;
      ~Return() {
        if (connection->broken()) return;  // dropped: out of step with the server
        std::lock_guard lock(impl.mutex);
        impl.spare.push_back(std::move(connection));
      }
    } give_back{*this, extra};
    return extra->call(request, what_text);
  }
  void check_key(const std::string& key, std::string_view op) const {
    if (key.size() > kMaxKeyBytes) {
      throw InvalidArgument(cat(what(op), ": key of ", key.size(), " bytes, above the limit of ", kMaxKeyBytes));
    }
  }
  std::vector<std::vector<std::byte>> gather(const std::string& name, std::span<const std::byte> blob,
                                             const std::string& what_text) {
    auto answer = call(bootstrap::GatherRequest{name, {blob.begin(), blob.end()}, client->wait_ms()}, what_text);
    auto* blobs = std::get_if<bootstrap::BlobsResponse>(&answer);
    if (blobs == nullptr || blobs->blobs.size() != static_cast<std::size_t>(self.world_size)) {
      throw ProtocolError(cat(what_text, ": the store answered with something other than ", self.world_size, " blobs"));
    }
    return std::move(blobs->blobs);
  }
};

namespace {

void check_rank_info(const RankInfo& info) {
  if (info.world_size < 1) throw InvalidArgument(cat("store: world size ", info.world_size, " is not positive"));
  if (info.rank < 0 || info.rank >= info.world_size) {
    throw InvalidArgument(cat("store: rank ", info.rank, " is outside a world of ", info.world_size));
  }
  if (info.master_port < 0 || info.master_port > 65535 || (info.master_port == 0 && info.world_size > 1)) {
    throw InvalidArgument(cat("rank ", info.rank, ": store port ", info.master_port,
                              " is not valid (0 is allowed only for a world of one)"));
  }
}

/// The Impl of a Store that is not moved-from (deduced, so that the private type is never named here).
template <class Ptr>
auto& live(Ptr& impl) {
  if (!impl) throw InvalidArgument("use of a moved-from pickle::Store");
  return *impl;
}

template <class T>
T expect(bootstrap::Response&& answer, const std::string& what) {
  if (auto* value = std::get_if<T>(&answer)) return std::move(*value);
  throw ProtocolError(cat(what, ": the store answered with an unexpected message"));
}

}  // namespace

Store::Store(const RankInfo& self) : Store(self, Options{}) {}

Store::Store(const RankInfo& self, Options options) {
  check_rank_info(self);
  auto impl = std::make_unique<Impl>();
  impl->self = self;
  // At most kMaxWaitSeconds (23 days): waits travel as milliseconds in an int (poll) and a u32 (the wire).
  impl->timeout_seconds =
      std::min(options.timeout_seconds > 0 ? options.timeout_seconds : env::timeout_seconds(), kMaxWaitSeconds);
  const std::string token = options.token.empty() ? bootstrap::job_token(self) : options.token;
  if (token.size() > bootstrap::kMaxTokenBytes) {
    throw InvalidArgument(cat("rank ", self.rank, ": store token of ", token.size(), " bytes, above the limit of ",
                              bootstrap::kMaxTokenBytes));
  }
  impl->token = token;
  if (self.rank == 0) {
    // Fewer ranks on this host than in the job: others will connect from elsewhere.
    const bool other_hosts = self.local_world_size < self.world_size;
    impl->server = std::make_unique<bootstrap::StoreServer>(self.master_addr, self.master_port, self.world_size, token,
                                                            impl->timeout_seconds, other_hosts);
    impl->self.master_port = impl->server->port();
  }
  // On failure impl's destructor stops rank 0's server at once: the other ranks see the connection close.
  impl->client = std::make_unique<bootstrap::StoreClient>(impl->self, token, impl->timeout_seconds);
  impl_ = std::move(impl);
}

Store::~Store() {
  if (!impl_) return;
  impl_->spare.clear();
  impl_->client.reset();
  if (impl_->server) {
    // The server lives in this process: keep it up until the other ranks are done with it (unless the job failed).
    impl_->server->finish(Deadline::after_seconds(impl_->job_failed.load() ? 0 : impl_->timeout_seconds));
  }
}

void Store::mark_job_failed() noexcept {
  if (impl_) impl_->job_failed.store(true);
}

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

void Store::set(const std::string& key, std::span<const std::byte> value) {
  auto& s = live(impl_);
  const std::string what = s.what(cat("store set '", key, "'"), value.size());
  s.check_key(key, cat("store set '", key, "'"));
  if (value.size() > kMaxValueBytes) throw InvalidArgument(cat(what, ": above the limit of ", kMaxValueBytes, " bytes"));
  expect<bootstrap::OkResponse>(s.call(bootstrap::SetRequest{key, {value.begin(), value.end()}}, what), what);
}

void Store::set(const std::string& key, std::string_view value) {
  set(key, std::span<const std::byte>(reinterpret_cast<const std::byte*>(value.data()), value.size()));
}

std::vector<std::byte> Store::get(const std::string& key) {
  auto& s = live(impl_);
  const std::string what = s.what(cat("store get '", key, "'"));
  s.check_key(key, "store get");
  return expect<bootstrap::ValueResponse>(s.call(bootstrap::GetRequest{key, s.client->wait_ms()}, what), what).value;
}

std::string Store::get_string(const std::string& key) {
  auto value = get(key);
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

bool Store::check(const std::string& key) {
  auto& s = live(impl_);
  const std::string what = s.what(cat("store check '", key, "'"));
  s.check_key(key, "store check");
  return expect<bootstrap::BoolResponse>(s.call(bootstrap::CheckRequest{key}, what), what).value;
}

void Store::wait(const std::vector<std::string>& keys) {
  auto& s = live(impl_);
  const std::string what = s.what(cat("store wait for ", keys.size(), " keys"));
  if (keys.size() > bootstrap::kMaxListEntries) throw InvalidArgument(cat(what, ": too many keys"));
  for (const auto& key : keys) s.check_key(key, "store wait");
  expect<bootstrap::OkResponse>(s.call(bootstrap::WaitRequest{keys, s.client->wait_ms()}, what), what);
}

std::int64_t Store::add(const std::string& key, std::int64_t delta) {
  auto& s = live(impl_);
  const std::string what = s.what(cat("store add to '", key, "'"));
  s.check_key(key, "store add");
  return expect<bootstrap::IntegerResponse>(s.call(bootstrap::AddRequest{key, delta}, what), what).value;
}

void Store::barrier(const std::string& name) {
  auto& s = live(impl_);
  // The name travels inside "barrier|<name>|<call>", which must fit a key: checked before the call is counted, so
  // that a caller who catches the error stays in step with the other ranks.
  constexpr std::size_t kFraming = 32;
  if (name.size() > kMaxKeyBytes - kFraming) {
    throw InvalidArgument(cat(s.what("barrier"), ": name of ", name.size(), " bytes, above the limit of ",
                              kMaxKeyBytes - kFraming));
  }
  std::uint64_t call = 0;
  {
    std::lock_guard lock(s.mutex);
    call = ++s.barrier_calls[name];
  }
  // The call number tells successive barriers of one name apart: every rank's n-th call meets the others' n-th.
  s.gather(cat("barrier|", name, "|", call), {}, s.what(cat("barrier '", name, "' (call ", call, ")")));
}

std::vector<std::vector<std::byte>> Store::allgather(std::span<const std::byte> mine) {
  auto& s = live(impl_);
  // Checked before the call is counted: a caller who catches the error stays in step with the other ranks.
  if (mine.size() > kMaxValueBytes) {
    throw InvalidArgument(
        cat(s.what("store allgather", mine.size()), ": above the limit of ", kMaxValueBytes, " bytes"));
  }
  std::uint64_t call = 0;
  {
    std::lock_guard lock(s.mutex);
    call = ++s.allgather_calls;
  }
  const std::string what = s.what(cat("store allgather (call ", call, ")"), mine.size());
  return s.gather(cat("allgather|", call), mine, what);
}

const RankInfo& Store::self() const { return live(impl_).self; }

double Store::timeout_seconds() const { return live(impl_).timeout_seconds; }

}  // namespace pickle
