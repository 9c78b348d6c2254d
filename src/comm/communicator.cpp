// Communicator set-up and teardown, windows, and the one-sided operations.
#include <sys/eventfd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <sstream>
#include <thread>

#include <pickle/communicator.hpp>
#include <pickle/error.hpp>

#include "collectives/ll_allreduce.hpp"
#include "collectives/reduce.hpp"
#include "comm/comm_impl.hpp"
#include "comm/host_identity.hpp"
#include "comm/peer_mesh.hpp"
#include "comm/store_registry.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/wire.hpp"
#include "device/backends.hpp"
#include "device/host/backoff.hpp"

namespace pickle {
namespace {

MemoryKind choose_kind(const Communicator::Options& options, const RankInfo& info) {
  if (options.memory) return *options.memory;
  // Cuda only when every local rank can have a GPU of its own.
  return device::cuda_device_count() >= info.local_world_size ? MemoryKind::Cuda : MemoryKind::Host;
}

/// The GPU of this rank: the one asked for, else the local rank's, round robin when CUDA memory was asked for on a
/// host with fewer GPUs than local ranks (several processes then share a GPU: the copies between them are
/// device-to-device copies inside it, which is how the GPU tests run on machines of one GPU).
int choose_device(const Communicator::Options& options, const RankInfo& info, MemoryKind kind) {
  if (kind != MemoryKind::Cuda) return -1;
  if (options.device >= 0) return options.device;
  const int gpus = device::cuda_device_count();
  return gpus > 0 ? info.local_rank % gpus : info.local_rank;
}

}  // namespace

std::vector<std::string> Communicator::Impl::gather_rows(const std::string& key, const std::string& mine) const {
  store->set(cat(key, info.rank), mine);
  std::vector<std::string> rows;
  for (int r = 0; r < info.world_size; ++r) rows.push_back(store->get_string(cat(key, r)));
  return rows;
}

void Communicator::Impl::check_settings_agree() const {
  // Settings that change what messages the ranks exchange: a rank whose value differs would fail a collective
  // partway (a size mismatch breaks the communicator's collectives), so they are compared once, here.
  // PICKLE_PIPELINE_SCHEDULE: ordered ranks await tokens that only ordered ranks raise.
  // PICKLE_ALLGATHER_OWN_COPY: relaying ranks expect their block back from rank + 1.
  // PICKLE_ALLREDUCE_LOADS_MAX: the loads form reads the peer's own cell, the copy form waits for the peer's copy.
  // PICKLE_ALLREDUCE_LL_MAX: the LL form polls flagged lines that only the LL form writes.
  // PICKLE_ALLREDUCE_PUSH_MIN: a pushed call reads its own cells, a pulled one the peer's own cell.
  constexpr const char* kMustAgree[] = {
      "PICKLE_ALLGATHER_OWN_COPY", "PICKLE_ALLREDUCE_LL_MAX", "PICKLE_ALLREDUCE_LOADS_MAX", "PICKLE_ALLREDUCE_PUSH_MIN",
      "PICKLE_ALLREDUCE_SCHEDULE", "PICKLE_COLL_CHUNK",       "PICKLE_COLL_HIERARCHY",      "PICKLE_PIPELINE_SCHEDULE"};
  std::string mine;
  // Each as it takes effect (unset reads as its default), so that a rank that sets the default agrees with one that
  // leaves it unset.
  for (const char* name : kMustAgree) {
    const std::string value = env::get(name);
    mine += cat(name, "=", value.empty() ? "(unset)" : value, "\n");
  }
  const auto rows = gather_rows(key_prefix + "settings/", mine);
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (rows[peer] == mine) continue;
    // Name the first setting that differs, with both values.
    std::istringstream ours(mine), theirs(rows[peer]);
    std::string a, b;
    while (std::getline(ours, a) && std::getline(theirs, b) && a == b) {
    }
    throw InvalidArgument(cat("rank ", info.rank, " -> peer ", peer, ": this rank has ", a, " but peer ", peer,
                              " has ", b, "; set it alike on every rank"));
  }
}

void Communicator::Impl::choose_transports() {
  const auto forced = transport::forced_kind();
  const int world = info.world_size;
  hosts = gather_rows(key_prefix + "host/", comm::host_identity());
  same_host.assign(static_cast<std::size_t>(world), true);
  for (int peer = 0; peer < world; ++peer) same_host[peer] = hosts[peer] == hosts[info.rank];
  same_gpu.assign(static_cast<std::size_t>(world), false);
  // Peer access as each rank sees it: a GPU is named by its PCI bus id, since ranks may see different ordinals.
  std::string reach(static_cast<std::size_t>(world), '1');
  std::vector<std::string> why(static_cast<std::size_t>(world));
  if (kind == MemoryKind::Cuda) {
    std::string bus_id = device::cuda_pci_bus_id(device);
    auto bus_ids = gather_rows(key_prefix + "gpu/", bus_id);
    for (int peer = 0; peer < world; ++peer) {
      same_gpu[peer] = peer != info.rank && same_host[peer] && bus_ids[peer] == bus_id;
    }
    for (int peer = 0; peer < world; ++peer) {
      if (peer != info.rank && same_host[peer] && !device::cuda_peer_reachable(device, bus_ids[peer], why[peer])) {
        reach[peer] = '0';
      }
    }
  }
  auto reach_rows = gather_rows(key_prefix + "reach/", reach);
  std::string chosen(static_cast<std::size_t>(world), '-');
  transports.resize(static_cast<std::size_t>(world));
  for (int peer = 0; peer < world; ++peer) {
    if (peer == info.rank) continue;
    transport::PairFacts facts;
    facts.memory = kind;
    facts.same_host = same_host[peer];
    facts.peer_access = reach[peer] == '1' && reach_rows[peer][info.rank] == '1';
    facts.no_peer_access_why = !why[peer].empty() ? why[peer] : cat("peer ", peer, " has no peer access to this GPU");
    transports[peer] = transport::choose(facts, forced, cat("rank ", info.rank, " -> peer ", peer));
    chosen[peer] = transport::kind_name(transports[peer].kind)[0];
  }
  // Both ranks of a pair must agree (PICKLE_TRANSPORT could differ between them): compare before building anything.
  auto chosen_rows = gather_rows(key_prefix + "transport/", chosen);
  for (int peer = 0; peer < world; ++peer) {
    if (peer == info.rank || chosen_rows[peer][info.rank] == chosen[peer]) continue;
    throw InvalidArgument(cat("rank ", info.rank, " -> peer ", peer, ": this rank chose the ",
                              transport::kind_name(transports[peer].kind), " transport but peer ", peer,
                              " chose another for the pair (is PICKLE_TRANSPORT set differently?)"));
  }
}

Communicator::Impl::Impl(Options options, const SplitFrom* split_from)
    : info(options.rank_info ? *options.rank_info : discover_rank_info()),
      kind(choose_kind(options, info)),
      device(choose_device(options, info, kind)),
      timeout_seconds(options.timeout_seconds > 0 ? options.timeout_seconds : env::timeout_seconds()),
      split_child(split_from != nullptr),
      peers(static_cast<std::size_t>(info.world_size)) {
  if (!split_child) log::set_rank(info.rank);  // a split communicator's rank is the group's, not the process's
  if (kind == MemoryKind::Cuda && device::cuda_device_count() == 0) {
    throw UnavailableError(cat("rank ", info.rank, ": CUDA memory requested but ", device::cuda_unavailable_reason()));
  }
#if PICKLE_HAVE_CUDA
  // Now, while nothing of this communicator is in flight, rather than at the first collective's first reduction:
  // loading a kernel may synchronize the context, and by then this rank's streams may wait for peers that wait for
  // this rank (two ranks as threads of one process deadlocked there on one H100).
  if (kind == MemoryKind::Cuda) {
    coll::load_reduce_kernels(device);
    coll::load_ll_allreduce_kernels(device);
  }
#endif
  if (split_from != nullptr) {
    store = split_from->store;
    key_prefix = split_from->key_prefix;
  } else {
    Store::Options store_options;
    store_options.timeout_seconds = timeout_seconds;
    store = comm::shared_store(info, store_options);
    // Every rank creates its communicators in the same order, so the n-th one has the same number everywhere.
    key_prefix = cat("comm/", store->add(cat("comm/count/", info.rank), 1), "/");
  }

  check_settings_agree();
  choose_transports();
  Deadline deadline = Deadline::after_seconds(timeout_seconds);
  channels = comm::connect_peer_mesh(*store, key_prefix, info, same_host,
                                     [this](const std::string& name) { store_barrier(name); }, deadline);
  for (int peer = 0; peer < info.world_size; ++peer) {
    channel_send_mutex.push_back(std::make_unique<std::recursive_mutex>());
    signal_order_mutex.push_back(std::make_unique<std::mutex>());
  }
  signals = std::make_unique<comm::SignalArea>(info.rank, info.world_size, kind, device, channels, same_host, deadline);
  ipc = std::make_unique<transport::ipc::IpcTransport>(info.rank, info.world_size, kind, device);
  try {
    start_transports_and_progress(deadline);
  } catch (...) {
    // A constructor that throws runs no destructor, and the members go in reverse order of declaration: `peers`
    // and `mutex` before `net` and `shm`, whose threads call fail_peer (a peer dying during the ready barrier).
    // Everything that calls back into this object stops first.
    if (progress.joinable()) stop_progress();
    match_enqueuers.clear();
    outbox->stop();
    outbox.reset();
#ifdef PICKLE_HAVE_LIBFABRIC
    net.reset();
#endif
    keep_last_gave_up_words();
    shm.reset();
    throw;
  }
  std::string pairs;
  for (int peer = 0; peer < info.world_size; ++peer) {
    if (peer != info.rank) pairs += cat(" ", peer, ":", transport::kind_name(transports[peer].kind));
  }
  PICKLE_LOG(Info, "comm", "communicator ready: " << info.world_size << " ranks, " << memory_kind_name(kind)
                                                   << " memory, device " << device << "; transports" << pairs);
}

void Communicator::Impl::start_transports_and_progress(const Deadline& deadline) {
  std::vector<bool> shm_peers(static_cast<std::size_t>(info.world_size), false);
  for (int peer = 0; peer < info.world_size; ++peer) {
    shm_peers[peer] = chose(peer, transport::Kind::Shm);
  }
  if (std::find(shm_peers.begin(), shm_peers.end(), true) != shm_peers.end()) {
    shm = std::make_unique<transport::shm::ShmTransport>(
        info.rank, kind, device, shm_peers, channels, deadline,
        [this](int peer, const std::string& reason) { fail_peer(peer, reason); });
    for (int peer = 0; peer < info.world_size; ++peer) {
      if (!shm->uses(peer)) continue;
      PairFailure& record = *peers[static_cast<std::size_t>(peer)].failure_record;
      std::lock_guard lock(record.mutex);
      record.peer_gave_up_word = shm->peer_gave_up_word(peer);
    }
  }
#ifdef PICKLE_HAVE_LIBFABRIC
  std::vector<bool> net_peers(static_cast<std::size_t>(info.world_size), false);
  for (int peer = 0; peer < info.world_size; ++peer) {
    net_peers[peer] = chose(peer, transport::Kind::Net);
  }
  if (std::find(net_peers.begin(), net_peers.end(), true) != net_peers.end()) {
    // The transport registers host memory only: GPU memory goes through pinned staging buffers (docs/rdma.md).
    stage_net = kind == MemoryKind::Cuda || env::get_bool("PICKLE_NET_STAGING");
    if (stage_net) {
      staging = std::make_unique<comm::StagingPool>(kind, std::max(0, device));
      staging_stream = device::make_stream(kind, std::max(0, device));
      staging_enqueuer = std::make_unique<SerialWorker>("net staging");
    }
    net = std::make_unique<transport::net::NetTransport>(
        info.rank, info.world_size, net_peers, *store, key_prefix + "net/", transport::net::options_from_env(),
        deadline, [this](int peer, const std::string& reason) { fail_peer(peer, reason); });
  }
#endif
  for (auto& peer : peers) {
    for (int slot = comm::kCompletionSlots - 1; slot >= 0; --slot) peer.free_slots.push_back(slot);
  }

  outbox = std::make_unique<SerialWorker>("control outbox");
  match_enqueuers.resize(static_cast<std::size_t>(info.world_size));
  wake = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) throw SystemError("eventfd for the progress thread", errno);
  progress = std::thread([this] { progress_loop(); });
  // Nobody may send before every rank's progress thread listens.
  store_barrier(key_prefix + "ready");
  join_collective_family(collective_family);  // its own, until host_groups makes it a group of another's
}

void Communicator::Impl::store_barrier(const std::string& name) {
  if (!split_child) return store->barrier(name);
  // The store's barrier counts every rank of the job; the ranks of a split communicator meet through keys of their
  // own (the name is used once: it carries a counter or the communicator's stage).
  store->set(cat(name, "/", info.rank), std::string_view{});
  std::vector<std::string> keys;
  for (int r = 0; r < info.world_size; ++r) keys.push_back(cat(name, "/", r));
  store->wait(keys);
}

Communicator::Impl::~Impl() {
  // Communicator's inline destructor asks the application's runtime; this library's may not know (it may be a copy).
  unwinding = unwinding || std::uncaught_exceptions() > 0;
  PICKLE_LOG(Debug, "comm", "communicator teardown" << (unwinding ? " while unwinding" : ""));
  leave_collective_family();  // a loss that another communicator of the family notes from now on does not write here
  // The two-level collectives' communicators first, in the same order on every rank (each meets its own ranks).
  if (host_groups_) {
    host_groups_->across.close(unwinding);
    host_groups_->host.close(unwinding);
    host_groups_.reset();
  }
  // What the application's streams still wait for now, before the barrier and the peers' goodbyes complete or fail
  // it: whatever of it never completes is reported on those streams at the end (retire_signal_area).
  const StreamWaitsAtClose stream_waits = stream_waits_at_close();
  // 1. Our own transfers finish: copies into peers' memory, staged chunks, RMA writes. Each step on its own: a
  // stream that fails to synchronize must not skip the others.
  auto attempt = [this](auto&& step) {
    try {
      step();
    } catch (const std::exception& e) {
      PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": communicator teardown: " << e.what());
    }
  };
  // The application's streams first: callbacks queued there (net writes and signals) use this communicator, and may
  // still have to issue transfers; the collectives' checks use its Requests.
  const Deadline streams_deadline = Deadline::after_seconds(timeout_seconds);
  settle_application_streams_at_close(stream_waits, streams_deadline);
  // Unwinding from an error, nothing waits: a check whose stream has not passed it becomes the stream's error at once.
  attempt([&] { settle_stream_checks(unwinding ? Deadline::after_seconds(0) : streams_deadline); });
  attempt([&] { ipc->synchronize_all(); });
  attempt([&] {
    if (staging_stream) staging_stream->synchronize();
  });
  attempt([&] {
    if (shm && !shm->synchronize_all(Deadline::after_seconds(timeout_seconds))) {
      PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": shm copies still queued after " << timeout_seconds << " s");
    }
  });
#ifdef PICKLE_HAVE_LIBFABRIC
  attempt([&] {
    if (net && !net->flush(Deadline::after_seconds(timeout_seconds))) {
      PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": net writes still pending after " << timeout_seconds << " s");
    }
  });
#endif
  // 2. Every rank must be done writing into our memory and signal words before they go away. Unwinding from an
  // error: do not make the peers wait; they see this rank's channels close and fail fast.
  // (The barrier comes before the Goodbye: a peer told "goodbye" fails what it still has pending with us, and a
  // message whose data is still on its way to it -- shm chunks not yet copied out, net writes not yet landed --
  // must not be among them.)
  try {
    if (!unwinding) store_barrier(key_prefix + "close");
  } catch (const std::exception& e) {
    PICKLE_LOG(Warn, "comm", "communicator teardown without a clean barrier: " << e.what());
  }
  outbox->drain(Deadline::after_seconds(1));  // the progress thread's last messages go before the Goodbye
  // 3. A Goodbye tells each peer that the end of the channel that follows is normal. While unwinding from an error
  // nothing is said: the channels just close, and the peers fail their pending operations with this rank at once.
  for (int peer = 0; peer < info.world_size && !unwinding; ++peer) {
    if (peer == info.rank) continue;
    try {
      send_control(peer, GoodbyeMessage{});
    } catch (const std::exception&) {
      // The peer is gone already: nothing to tell it.
    }
  }
  stop_progress();
  // Before the channels and the state that their jobs use go away; the matched sends' jobs post to the outbox. (Sends
  // the progress thread matched after step 1 may be held as well.)
  settle_application_streams_at_close(stream_waits, Deadline::after_seconds(1));
  // From here on the control channels and transports go: a callback that a stream drops later (one held past both
  // settles) must not report its send through them (on_application_stream).
  application_hooks_closed.store(true);
  {
    std::lock_guard hooks_lock(drop_hooks->mutex);  // waits for a hook that runs now
    drop_hooks->closed = true;
  }
  match_enqueuers.clear();
  if (!outbox->drain(Deadline::after_seconds(1))) PICKLE_LOG(Warn, "comm", "control messages still queued at teardown");
  outbox->stop();  // before the pointer goes: a job that runs now may post (raise_signals_from_outbox)
  outbox.reset();
#ifdef PICKLE_HAVE_LIBFABRIC
  // A peer that exited first leaves failed completions: no rail may report them (fail_peer) while the transports
  // and the state fail_peer uses go away.
  if (net) net->stop_callbacks();
#endif
  // A pair whose peer was stopped at the close leaves CUDA streams running (ShmTransport::close): they may still
  // write the completion words of the operations they carry, so the words stay (retire_signal_area).
  attempt([&] {
    if (shm && shm->close()) shm_streams_left_running = true;
  });
  keep_last_gave_up_words();
  shm.reset();
#ifdef PICKLE_HAVE_LIBFABRIC
  net.reset();
#endif
  {
    // What fails a peer from here on (retire_signal_area, a late callback on an application stream) must not queue
    // work on the staging stream: it fails its receives at once.
    std::lock_guard lock(mutex);
    staging_drained = true;
  }
  // The peers' last puts into staged windows and pieces of staged receives may have landed after step 1 (until
  // net.reset() above): their copies and `landed` callbacks, which use `mutex` and `peers`, are queued on the
  // staging stream, or still with the staging enqueuer, and must run before those members go. The enqueuer stops
  // here (its jobs use them too), not with the members.
  if (staging_enqueuer) {
    if (!staging_enqueuer->drain(Deadline::after_seconds(timeout_seconds))) {
      PICKLE_LOG(Warn, "comm", "rank " << info.rank << ": staged copies still being queued after " << timeout_seconds
                                       << " s");
    }
    staging_enqueuer.reset();
  }
  attempt([&] {
    if (staging_stream) staging_stream->synchronize();
  });
  // 4. Nothing of this communicator writes the signal words any more: what the application's streams still wait for
  // never comes. Release it, and free the words only if no stream can read them any more.
  attempt([&] { retire_signal_area(stream_waits); });
}

void Communicator::Impl::on_application_stream(device::Stream& stream, std::function<void()> fn,
                                                std::function<void()> if_dropped) {
  // The count drops when the stream lets go of the callback, whether it ran it (even when fn threw: the stream
  // reports it) or dropped it unrun (a host stream that gave up a wait, or was destroyed stuck): teardown waits for
  // it, and a dropped callback must not make it wait PICKLE_TIMEOUT. It drops last, after what fn and if_dropped
  // captured is gone (a staged put's pinned buffer goes back to the communicator's pool). The state is shared by the
  // copies that std::function may make of the callback, and goes with the last of them: on the stream's thread once
  // it ran or dropped it, or here (a stream that dropped it before host_callback returned). `ran` and `accepted` need
  // no atomics: each is written before a release of a reference, and read by whoever releases the last one. Once the
  // teardown has closed the control channels (application_hooks_closed), a dropped callback reports nothing.
  struct Pending {
    Impl* comm;
    std::function<void()> fn, if_dropped;
    bool accepted = false;  // host_callback returned: from here on, a callback that never ran was dropped
    bool ran = false;
    Pending(Impl* owner, std::function<void()> run, std::function<void()> dropped)
        : comm(owner), fn(std::move(run)), if_dropped(std::move(dropped)) {
      comm->application_callbacks.fetch_add(1);
    }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    ~Pending() {
      if (accepted && !ran && if_dropped && !comm->application_hooks_closed.load()) {
        try {
          if_dropped();
        } catch (const std::exception& e) {
          PICKLE_LOG(Error, "comm", "rank " << comm->info.rank << ": reporting an operation that its stream dropped "
                                    "unrun failed: " << e.what());
        }
      }
      fn = nullptr;
      if_dropped = nullptr;
      comm->application_callbacks.fetch_sub(1);
    }
  };
  struct Callback {
    std::shared_ptr<Pending> pending;
    void operator()() const {
      pending->ran = true;
      std::function<void()> call = std::move(pending->fn);
      call();
    }
  };
  auto pending = std::make_shared<Pending>(this, std::move(fn), std::move(if_dropped));
  stream.host_callback(Callback{.pending = pending});
  pending->accepted = true;
}

void Communicator::Impl::hear_if_dropped(device::Stream& stream, std::function<void()> if_dropped) {
  // As on_application_stream's Pending, without its count: shared by the copies std::function may make, and run
  // (or not) by whoever releases the last of them.
  struct Watch {
    std::shared_ptr<DropHooks> hooks;
    std::function<void()> if_dropped;
    int rank;
    bool accepted = false;  // host_callback returned: from here on, a callback that never ran was dropped
    bool ran = false;
    ~Watch() {
      if (!accepted || ran) return;
      std::lock_guard lock(hooks->mutex);
      if (hooks->closed) return;
      try {
        if_dropped();
      } catch (const std::exception& e) {
        PICKLE_LOG(Error, "comm", "rank " << rank << ": reporting an operation that its stream dropped unrun failed: "
                                  << e.what());
      }
    }
  };
  struct Callback {
    std::shared_ptr<Watch> watch;
    void operator()() const { watch->ran = true; }
  };
  auto watch = std::make_shared<Watch>();
  watch->hooks = drop_hooks;
  watch->if_dropped = std::move(if_dropped);
  watch->rank = info.rank;
  stream.host_callback(Callback{.watch = watch});
  watch->accepted = true;
}

bool Communicator::Impl::drain_application_callbacks(const Deadline& deadline) const {
  return poll_until(deadline, [&] { return application_callbacks.load() == 0; });
}

void Communicator::Impl::settle_application_streams_at_close(const StreamWaitsAtClose& waits,
                                                             const Deadline& deadline) {
  // Sends the progress thread matched are queued on their streams first (their callbacks count in the second drain).
  if (drain_match_enqueuers(deadline) && drain_application_callbacks(deadline)) return;
  // Held behind a wait of a stream that nothing may satisfy now (a signal of a peer that is still busy, or gone
  // without a goodbye): a matched-sends worker blocked queuing on a full copy stream, or pickle's callbacks. Release
  // now what retire_signal_area would at the end: joining such a worker would wait for ever (on CUDA the teardown's
  // synchronizing of the streams did not even come back while a worker was blocked queuing on one of them, one H200),
  // and a callback that ran after the communicator went would use freed memory (tests/comm/full_stream_children.cpp).
  PICKLE_LOG(Error, "comm", "rank " << info.rank << ": " << application_callbacks.load() << " operation(s) queued on "
                            "the application's streams had not run after " << timeout_seconds << " s (or matched "
                            "sends were still being queued behind them); releasing the streams' waits on this "
                            "communicator; synchronize the streams before destroying the communicator");
  std::set<int> pending_peers;
  {
    std::lock_guard lock(mutex);
    pending_peers = peers_streams_still_wait_on_locked(waits);
  }
  for (int peer : pending_peers) fail_peer_that_may_be_alive(peer, closed_while_streams_waited(peer));
  const Deadline after_release = Deadline::after_seconds(timeout_seconds);
  if (!drain_match_enqueuers(after_release) || !drain_application_callbacks(after_release)) {
    PICKLE_LOG(Error, "comm", "rank " << info.rank << ": " << application_callbacks.load() << " operation(s) still "
                              "queued on the application's streams " << timeout_seconds << " s after their waits "
                              "were released: a stream is held by something else (a kernel, another wait)");
  }
}

std::shared_ptr<device::PassedCheck> Communicator::Impl::check_when_passed(device::Stream& stream, std::string what,
                                                                          std::function<void()> check) {
  // Not under `mutex`: the stream runs the checks it has passed (this communicator's too, which lock it) here.
  std::shared_ptr<device::PassedCheck> entry = stream.check_when_passed(std::move(check));
  std::lock_guard lock(mutex);
  std::erase_if(stream_checks, [](const StreamCheck& known) { return known.check.expired(); });
  stream_checks.push_back(StreamCheck{entry, std::move(what)});
  return entry;
}

void Communicator::Impl::settle_stream_checks(const Deadline& deadline) {
  std::vector<StreamCheck> checks;
  {
    std::lock_guard lock(mutex);
    checks.swap(stream_checks);
  }
  for (const StreamCheck& known : checks) {
    std::shared_ptr<device::PassedCheck> check = known.check.lock();
    if (!check) continue;  // it ran, or its stream is gone
    check->settle(deadline, cat(known.what, ": the communicator was destroyed before the stream had passed the end of "
                                            "this operation, so whether all of its data arrived is unknown; "
                                            "synchronize the stream before destroying the communicator"));
  }
}

void Communicator::Impl::stop_progress() {
  stopping = true;
  std::uint64_t one = 1;
  if (::write(wake.get(), &one, sizeof one) < 0) PICKLE_LOG(Warn, "comm", "could not wake the progress thread");
  if (progress.joinable()) progress.join();
}

void Communicator::Impl::check_peer(int peer, const OpContext& ctx) const {
  if (peer < 0 || peer >= info.world_size || peer == info.rank) {
    throw InvalidArgument(cat(describe(ctx), ": peer ", peer, " is not another rank of this communicator (world size ",
                              info.world_size, ")"));
  }
}

// --- Communicator

Communicator Communicator::from_env() { return Communicator(Options{}); }
Communicator::Communicator(Options options) : impl_(new Impl(std::move(options))) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
void Communicator::ImplDeleter::operator()(Impl* impl) const noexcept { delete impl; }
void Communicator::close(bool unwinding) noexcept {
  impl_->unwinding = unwinding;
  impl_.reset();
}

int Communicator::rank() const noexcept { return impl_->info.rank; }
int Communicator::world_size() const noexcept { return impl_->info.world_size; }
MemoryKind Communicator::memory_kind() const noexcept { return impl_->kind; }
int Communicator::device() const noexcept { return impl_->device; }
const RankInfo& Communicator::rank_info() const noexcept { return impl_->info; }

Stream Communicator::make_stream() {
  return Stream(std::shared_ptr<device::Stream>(device::make_stream(impl_->kind, std::max(0, impl_->device))));
}

Buffer Communicator::alloc(std::size_t bytes) {
  std::shared_ptr<device::Allocation> allocation = device::allocate(impl_->kind, bytes, std::max(0, impl_->device));
  void* data = allocation->data();
  return Buffer(std::static_pointer_cast<void>(allocation), data, bytes, impl_->kind);
}

Window Communicator::register_memory(void* ptr, std::size_t bytes) {
  return Window(impl_->register_window(ptr, bytes));
}

std::shared_ptr<const WindowState> Communicator::Impl::register_window(void* ptr, std::size_t bytes) {
  Impl& c = *this;
  OpContext ctx{.rank = c.info.rank, .op = "register_memory", .bytes = bytes};
  auto state = std::make_shared<WindowState>();
  state->owner = &c;
  state->local = ptr;
  state->ranks.resize(static_cast<std::size_t>(c.info.world_size));
  WindowState::Entry mine;
  mine.bytes = bytes;
  bool any_net = false;
  for (int peer = 0; peer < c.info.world_size; ++peer) {
    if (peer == c.info.rank) continue;
    std::tie(mine.alloc_id, mine.offset) = c.announce(peer, ptr, bytes, ctx);
    any_net = any_net || c.uses_net(peer);
  }
#ifdef PICKLE_HAVE_LIBFABRIC
  if (any_net && bytes != 0) {
    // One registration serves every net peer: they RMA-write into it (staged: into a pinned buffer of the window's
    // size, copied into place as each put lands).
    if (c.stage_net) state->staging = c.staging->take(bytes);
    const auto region = c.net->expose(c.stage_net ? state->staging.get() : ptr, bytes);
    mine.net_addr = region.addr;
    mine.net_key = region.key;
  }
#endif

  {
    // Listed before this rank publishes its entry: a peer that saw the entry may put (shm: through this rank's
    // progress thread, which looks the window up) at once.
    std::lock_guard lock(c.mutex);
    state->id = c.next_window_id++;
    state->ranks[static_cast<std::size_t>(c.info.rank)] = mine;
    c.windows.push_back(state);
  }
  // Named keys (not the store's anonymous allgather), so that communicators sharing the store never mix entries.
  const std::string key = cat(c.key_prefix, "window/", state->id, "/");
  PayloadWriter w;
  w.u64(mine.alloc_id).u64(mine.offset).u64(mine.bytes).u64(mine.net_addr).u64(mine.net_key);
  c.store->set(key + std::to_string(c.info.rank), w.take());
  Deadline deadline = Deadline::after_seconds(c.timeout_seconds);
  for (int r = 0; r < c.info.world_size; ++r) {
    auto blob = c.store->get(key + std::to_string(r));
    PayloadReader reader("window entry", blob);
    auto& entry = state->ranks[static_cast<std::size_t>(r)];
    entry.alloc_id = reader.u64("alloc_id");
    entry.offset = reader.u64("offset");
    entry.bytes = reader.u64("bytes");
    entry.net_addr = reader.u64("net_addr");
    entry.net_key = reader.u64("net_key");
    reader.expect_end();
    if (r == c.info.rank || entry.bytes == 0 || c.uses_shm(r) || c.uses_net(r)) continue;
    // The peer's announcement travels on its control channel; wait until the progress thread has mapped it.
    const OpContext peer_ctx{.rank = c.info.rank, .peer = r, .op = "register_memory", .bytes = entry.bytes};
    bool mapped = c.wait_for_progress(deadline, [&] {
      if (c.ipc->cache().contains(r, entry.alloc_id)) return true;
      c.check_peer_alive(r, peer_ctx);
      return false;
    });
    if (!mapped) {
      throw TimeoutError(cat(describe(peer_ctx), ": the peer's memory was not announced within ", c.timeout_seconds,
                             " s"));
    }
  }
  return state;
}

void Communicator::put(Stream& stream, const Window& window, int peer, std::size_t dst_offset, const void* src,
                       std::size_t bytes) {
  Impl& c = *impl_;
  OpContext ctx{.rank = c.info.rank, .peer = peer, .op = "put", .bytes = bytes};
  c.check_peer(peer, ctx);
  const WindowState* state = window.state();
  if (state == nullptr) throw InvalidArgument(cat(describe(ctx), ": the window is empty (not registered)"));
  if (state->owner != &c) {
    throw InvalidArgument(cat(describe(ctx), ": window ", state->id, " was registered on another communicator"));
  }
  const auto& entry = state->ranks[static_cast<std::size_t>(peer)];
  if (dst_offset > entry.bytes || bytes > entry.bytes - dst_offset) {
    throw InvalidArgument(cat(describe(ctx), ": offset ", dst_offset, " + ", bytes, " bytes is past the ",
                              entry.bytes, " bytes that peer ", peer, " registered in window ", state->id));
  }
  if (bytes == 0) return;
  if (src == nullptr) throw InvalidArgument(cat(describe(ctx), ": source pointer is null"));
  c.check_peer_alive(peer, ctx);
  if (c.uses_net(peer)) {
    c.net_put(stream.impl(), *state, peer, dst_offset, src, bytes);
    return;
  }
  if (c.uses_shm(peer)) {
    c.shm_put(stream.impl(), *state, peer, dst_offset, src, bytes);
    return;
  }
  void* dst = c.ipc->remote_address(peer, entry.alloc_id, entry.offset + dst_offset, bytes, ctx);
  c.ipc->copy(stream.impl(), dst, src, bytes);
}

void Communicator::signal(Stream& stream, int peer, int slot) {
  Impl& c = *impl_;
  OpContext ctx{.rank = c.info.rank, .peer = peer, .op = "signal"};
  c.check_peer(peer, ctx);
  if (slot < 0 || slot >= kSignalSlots) throw InvalidArgument(cat(describe(ctx), ": slot ", slot, " out of range"));
  c.check_peer_alive(peer, ctx);
  c.signal_peer(stream.impl(), peer, slot);
}

std::uint32_t Communicator::Impl::signal_peer(device::Stream& stream, int peer, int slot, std::uint32_t by) {
  // The count is taken and its write enqueued under the pair's signal-order lock: two threads signalling the slot
  // must not enqueue their counts in the opposite order (the later write would move the peer's word back). Signals
  // of one slot from streams that nothing orders may still reach the peer in either order (over ipc the two streams'
  // writes race, over shm their callbacks do): the contract asks for ordered streams (communicator.hpp). No other
  // lock is held while queuing: on a full stream that waits until the stream ran some of its work, and its host
  // callbacks (this signal's own message, over net or shm) take the mutex and the channel's lock.
  std::lock_guard signal_lock(*signal_order_mutex[peer]);
  std::uint32_t value;
  {
    std::lock_guard lock(mutex);
    value = peers[peer].signals_sent[slot] += by;
    note_stream_on_words_locked(stream);  // ipc: the stream writes into the peer's word
  }
  if (uses_net(peer)) {
    net_signal(stream, peer, slot, value);
  } else if (uses_shm(peer)) {
    shm_signal(stream, peer, slot, value);
  } else {
    stream.write_value(signals->remote_word_for_streams(peer, slot), value);
  }
  return value;
}

void Communicator::Impl::raise_signal_from_host(int peer, int slot) {
  // Under the pair's signal-order lock, as signal_peer: a count taken after this one is queued after it.
  std::lock_guard signal_lock(*signal_order_mutex[peer]);
  deliver_latest_signal(peer, slot);
}

void Communicator::Impl::raise_signals_from_outbox(std::vector<int> targets, int slot, int attempt) {
  outbox->post([this, targets = std::move(targets), slot, attempt]() mutable {
    if (application_hooks_closed.load()) return;  // the teardown closes the channels
    std::vector<int> busy;
    for (const int peer : targets) {
      std::unique_lock signal_lock(*signal_order_mutex[peer], std::try_to_lock);
      if (!signal_lock.owns_lock()) {
        busy.push_back(peer);
        continue;
      }
      try {
        deliver_latest_signal(peer, slot);
      } catch (const std::exception& e) {
        PICKLE_LOG(Debug, "comm", "rank " << info.rank << ": " << comm::signal_slot_name(slot) << " for peer " << peer
                                          << " could not be raised from the host: " << e.what());
      }
    }
    if (busy.empty()) return;
    // The lock's holder queues a signal and lets go in moments, unless its stream is full (then it waits up to
    // PICKLE_TIMEOUT): back off, up to 1 ms a round, rather than spin the outbox's thread.
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 << std::min(attempt, 7))));
    raise_signals_from_outbox(std::move(busy), slot, attempt + 1);
  });
}

void Communicator::Impl::deliver_latest_signal(int peer, int slot) {
  std::uint32_t value;
  {
    std::lock_guard lock(mutex);
    check_peer_alive_locked(peer, {.rank = info.rank, .peer = peer, .op = "signal"});
    value = peers[peer].signals_sent[slot];
  }
  if (uses_net(peer)) {
    send_net_signal(peer, slot, value);
  } else if (uses_shm(peer)) {
    send_shm_signal(peer, slot, value);
  } else {
    signals->store_remote(peer, slot, value);
  }
}

std::vector<std::uint32_t> Communicator::Impl::signal_peers(device::Stream& stream, std::span<const int> targets,
                                                          int slot, std::span<const device::Stream::Flag> also) {
  // As signal_peer, under every pair's signal-order lock at once.
  const auto signal_locks = lock_signal_order(targets);
  const std::vector<std::uint32_t> values = next_signal_counts(stream, targets, slot);
  std::vector<device::Stream::Flag> flags(also.begin(), also.end());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    flags.push_back({signals->remote_word_for_streams(targets[i], slot), values[i]});
  }
  stream.write_values(flags);
  return values;
}

std::vector<std::uint32_t> Communicator::Impl::count_signals_written_by_kernel(device::Stream& stream,
                                                                             std::span<const int> targets, int slot) {
  const auto signal_locks = lock_signal_order(targets);
  return next_signal_counts(stream, targets, slot);
}

std::vector<std::unique_lock<std::mutex>> Communicator::Impl::lock_signal_order(std::span<const int> targets) {
  // In rank order: no two callers wait on each other.
  std::vector<int> order(targets.begin(), targets.end());
  std::sort(order.begin(), order.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (int peer : order) locks.emplace_back(*signal_order_mutex[peer]);
  return locks;
}

std::vector<std::uint32_t> Communicator::Impl::next_signal_counts(device::Stream& stream, std::span<const int> targets,
                                                                int slot) {
  std::vector<std::uint32_t> values;
  std::lock_guard lock(mutex);
  for (int peer : targets) {
    if (uses_net(peer) || uses_shm(peer) || !same_host[static_cast<std::size_t>(peer)]) {
      throw Error(ErrorCode::Internal, cat("rank ", info.rank, ": signal_peers: peer ", peer, " is not over ipc"));
    }
    values.push_back(peers[peer].signals_sent[slot] += 1);
  }
  note_stream_on_words_locked(stream);  // the stream (or its kernel) writes into the peers' words
  return values;
}

void Communicator::wait(Stream& stream, int peer, int slot, std::uint32_t expected) {
  Impl& c = *impl_;
  OpContext ctx{.rank = c.info.rank, .peer = peer, .op = "wait"};
  c.check_peer(peer, ctx);
  if (slot < 0 || slot >= kSignalSlots) throw InvalidArgument(cat(describe(ctx), ": slot ", slot, " out of range"));
  c.check_peer_alive(peer, ctx);
  c.wait_signal_on_stream(stream.impl(), peer, slot, expected);
  c.check_wait(stream.impl(), peer, slot, expected);
}

void Communicator::Impl::check_wait(device::Stream& stream, int peer, int slot, std::uint32_t expected) {
  // A failed pair releases every stream wait on the peer's signals, so that none hangs; but a released wait did not
  // see its signal, and the data the signal stands for may not be there. The check runs once the stream has passed
  // the wait, so that the stream's next synchronize reports it. A wait its signal satisfied before the failure passes,
  // unless the peer gave up its shm pair (then no signal from it is taken: PairFailure::peer_gave_up).
  // The record is made with the peer's state and never replaced: no lock to take it.
  stream.check_when_passed([record = peers[peer].failure_record, rank = info.rank, peer, slot, expected] {
    throw_if_released(*record, OpContext{.rank = rank, .peer = peer, .op = "wait"}, slot, expected);
  });
}

void Communicator::Impl::throw_if_released(PairFailure& record, const OpContext& ctx, int slot,
                                           std::uint32_t expected) {
  std::lock_guard lock(record.mutex);
  const std::string what = comm::signal_slot_name(slot);
  // The stream passed the wait before this runs: a signal that a given-up pair's rings let through (with the puts
  // before it copied out of stale slots) shows here.
  if (record.peer_gave_up()) {
    throw PeerError(cat(describe(ctx), " for ", what, " to reach ", expected, ": ", gave_up_text(ctx.rank, ctx.peer)),
                    ctx.peer);
  }
  const std::uint32_t reached = record.signals[static_cast<std::size_t>(slot)];
  if (!record.failed || device::host::flag_reached(reached, expected)) return;
  // The net put that had not landed, unless the failure names it already (the peer's NetPutFailedMessage).
  const bool named = record.net_put_missing.empty() || record.reason.find(record.net_put_missing) != std::string::npos;
  const std::string missing = named ? "" : cat(", and its ", record.net_put_missing, " had not landed");
  const std::string message = cat(describe(ctx), " for ", what, " to reach ", expected, ": the pair with peer ",
                                  ctx.peer, " failed while it stood at ", reached, missing, ": ", record.reason);
  if (record.timed_out) throw TimeoutError(message);
  throw PeerError(message, ctx.peer);
}

Request Communicator::send(int peer, int tag, const void* ptr, std::size_t bytes, Stream* after) {
  if (tag < 0) {
    throw InvalidArgument(cat(describe({.rank = impl_->info.rank, .peer = peer, .op = "send", .bytes = bytes}),
                              ": tag ", tag, ": tags below 0 are reserved for collectives"));
  }
  return impl_->send(peer, tag, ptr, bytes, after);
}

Request Communicator::recv(int peer, int tag, void* ptr, std::size_t bytes) {
  if (tag < 0) {
    throw InvalidArgument(cat(describe({.rank = impl_->info.rank, .peer = peer, .op = "recv", .bytes = bytes}),
                              ": tag ", tag, ": tags below 0 are reserved for collectives"));
  }
  return impl_->recv(peer, tag, ptr, bytes);
}

std::string Communicator::transport(int peer) const {
  if (peer < 0 || peer >= impl_->info.world_size) {
    throw InvalidArgument(cat("rank ", impl_->info.rank, ": transport(", peer, "): no such rank"));
  }
  if (peer == impl_->info.rank) return "self";
  return transport::kind_name(impl_->transports[static_cast<std::size_t>(peer)].kind);
}

std::size_t Communicator::posted_receives(int peer, int tag) const {
  impl_->check_peer(peer, {.rank = impl_->info.rank, .peer = peer, .op = "posted_receives"});
  std::lock_guard lock(impl_->mutex);
  const auto& posts = impl_->peers[static_cast<std::size_t>(peer)].pending_posts;
  auto it = posts.find(tag);
  return it == posts.end() ? 0 : it->second.size();
}

void Communicator::barrier() {
  int call;
  {
    std::lock_guard lock(impl_->mutex);
    call = ++impl_->user_barriers;
  }
  impl_->store_barrier(cat(impl_->key_prefix, "barrier/", call));
}

CommStats Communicator::stats() const {
  CommStats stats;
  stats.ipc = impl_->ipc->stats();
  if (impl_->shm) stats.shm = impl_->shm->stats();
#ifdef PICKLE_HAVE_LIBFABRIC
  if (impl_->net) stats.net = impl_->net->stats();
#endif
  stats.local_copy_bytes = impl_->local_copy_bytes.load();
  // What the two-level collectives moved through their own communicators is this communicator's traffic too.
  if (impl_->host_groups_) {
    for (const Communicator* group : {&impl_->host_groups_->host, &impl_->host_groups_->across}) {
      const CommStats more = group->stats();
      for (auto [sum, add] : {std::pair{&stats.ipc, &more.ipc}, {&stats.shm, &more.shm}, {&stats.net, &more.net}}) {
        sum->bytes += add->bytes;
        sum->operations += add->operations;
        sum->ipc_opens += add->ipc_opens;
        sum->ipc_closes += add->ipc_closes;
        sum->cache_hits += add->cache_hits;
        sum->completion_lane_writes += add->completion_lane_writes;
      }
      stats.local_copy_bytes += more.local_copy_bytes;
    }
  }
  return stats;
}

// --- small handle types

MemoryKind Stream::kind() const noexcept { return impl_->kind(); }
int Stream::device() const noexcept { return impl_->device(); }
void Stream::synchronize() { impl_->synchronize(); }
bool Stream::query() { return impl_->query(); }
void* Stream::native_handle() const noexcept { return impl_->native_handle(); }

void* Buffer::data() const noexcept { return data_; }
std::size_t Buffer::bytes() const noexcept { return bytes_; }
MemoryKind Buffer::kind() const noexcept { return kind_; }

int Window::id() const noexcept { return state_ ? state_->id : -1; }
void* Window::local() const noexcept { return state_ ? state_->local : nullptr; }
std::size_t Window::bytes(int rank) const {
  if (!state_ || rank < 0 || rank >= static_cast<int>(state_->ranks.size())) {
    throw InvalidArgument(cat("window ", id(), ": no rank ", rank));
  }
  return state_->ranks[static_cast<std::size_t>(rank)].bytes;
}

bool Request::test() {
  if (!state_) throw InvalidArgument("test() on an empty Request");
  return state_->comm->test(*state_);
}
void Request::wait() {
  if (!state_) throw InvalidArgument("wait() on an empty Request");
  state_->comm->wait(*state_);
}
void Request::on_stream(Stream& stream) {
  if (!state_) throw InvalidArgument("on_stream() on an empty Request");
  // A send whose copy went onto `stream` needs no check (and no wait, or only a join of the stream's completion lane):
  // it was matched and queued in send(), whose failures Impl::on_stream rethrows here, and nothing fails it later (an
  // ipc send is not followed once queued).
  if (state_->comm->on_stream(*state_, stream.impl())) state_->comm->report_on_stream(state_, stream.impl());
}
std::size_t Request::bytes() const noexcept { return state_ ? state_->ctx.bytes : 0; }

}  // namespace pickle
