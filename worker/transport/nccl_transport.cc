#include "worker/transport/nccl_transport.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "worker/transport/frame_header.h"

// NCCL results through the one checking macro (PT_CUDA_RETURN_IF_ERROR): an overload of the
// macro's ToStatus for ncclResult_t. (Belongs in kernels/cuda/cuda_check.h once another user of
// NCCL appears; defined here to keep this change inside the transport.)
namespace pipetrain::kernels::cuda {

absl::Status ToStatus(ncclResult_t err, const char* expr, const char* file, int line) {
  if (err == ncclSuccess || err == ncclInProgress) return absl::OkStatus();
  const std::string what =
      absl::StrCat(expr, " failed at ", file, ":", line, ": ", ncclGetErrorString(err));
  switch (err) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(what);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(what);
    default:
      return absl::InternalError(what);
  }
}

}  // namespace pipetrain::kernels::cuda

namespace pipetrain::worker {
namespace {

using kernels::cuda::ToStatus;

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

cudaStream_t AsStream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t AsEvent(void* e) { return static_cast<cudaEvent_t>(e); }

// What this rank announces to a peer for one round: a message, a bye, or nothing.
FrameHeader RoundHeader(const Message* m, bool bye) {
  if (m == nullptr) return EmptyHeader(bye);
  FrameHeader h = MessageHeader(*m);
  h.flags |= kFrameChecksumInHeader;
  h.checksum = PayloadChecksum(m->data);
  return h;
}

// Short sleeps between polls: a round's wait is short when peers are alive, and a poll is cheap.
void PollPause() { std::this_thread::sleep_for(std::chrono::microseconds(5)); }

}  // namespace

absl::Status RunNcclGroup(const std::function<absl::Status()>& body, ncclResult_t (*group_start)(),
                          ncclResult_t (*group_end)()) {
  PT_CUDA_RETURN_IF_ERROR(group_start());
  const absl::Status status = body();
  const absl::Status end = ToStatus(group_end(), "ncclGroupEnd()", __FILE__, __LINE__);
  return status.ok() ? end : status;
}

IdleBackoff::IdleBackoff(absl::Duration min, absl::Duration max)
    : min_(min), max_(std::max(min, max)), next_(min) {}

absl::Duration IdleBackoff::Next() {
  const absl::Duration sleep = next_;
  next_ = std::min(next_ * 2, max_);
  return sleep;
}

std::string SerializeNcclUniqueId(const ncclUniqueId& id) {
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<ncclUniqueId> ParseNcclUniqueId(absl::string_view bytes) {
  ncclUniqueId id;
  if (bytes.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl_unique_id must be ", sizeof(id.internal), " bytes, got ", bytes.size()));
  }
  std::memcpy(id.internal, bytes.data(), bytes.size());
  return id;
}

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  PT_CUDA_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return SerializeNcclUniqueId(id);
}

NcclTransport::NcclTransport(NcclTransportOptions options)
    : options_(std::move(options)), mailbox_(options_.world_size) {
  index_of_.assign(options_.world_size, -1);
  for (int peer : options_.peers) {
    index_of_[peer] = static_cast<int>(peers_.size());
    PeerState state;
    state.rank = peer;
    peers_.push_back(state);
  }
  absl::MutexLock lock(&mu_);
  outboxes_.resize(peers_.size());
  closed_.assign(peers_.size(), false);
}

absl::StatusOr<std::unique_ptr<NcclTransport>> NcclTransport::Create(NcclTransportOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " outside world of ", options.world_size));
  }
  std::vector<bool> seen(options.world_size, false);
  for (int peer : options.peers) {
    if (peer < 0 || peer >= options.world_size || peer == options.rank || seen[peer]) {
      return absl::InvalidArgumentError(absl::StrCat("peer ", peer, " is not another rank of 0..",
                                                     options.world_size - 1,
                                                     " (or is listed twice)"));
    }
    seen[peer] = true;
  }
  PT_RETURN_IF_ERROR(ParseNcclUniqueId(options.unique_id).status());
  auto transport = std::unique_ptr<NcclTransport>(new NcclTransport(std::move(options)));
  if (absl::Status status = transport->Init(); !status.ok()) {
    transport->AbortComm();  // a half-joined communicator must not be destroyed cleanly
    return status;
  }
  transport->thread_ = std::thread([t = transport.get()] { t->Loop(); });
  return transport;
}

std::string NcclTransport::PeerRanks(const std::vector<int>& indices) const {
  std::vector<int> ranks;
  for (int i : indices) ranks.push_back(peers_[i].rank);
  return absl::StrJoin(ranks, ", ");
}

absl::Status NcclTransport::Init() {
  PT_ASSIGN_OR_RETURN(ncclUniqueId id, ParseNcclUniqueId(options_.unique_id));
  PT_CUDA_DEVICE_SCOPE(options_.device);
  cudaStream_t stream = nullptr;
  PT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  cudaEvent_t event = nullptr;
  PT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  event_ = event;
  const size_t header_bytes = std::max<size_t>(1, 2 * peers_.size()) * kHeaderBytes;
  PT_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&header_dev_), header_bytes));
  PT_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(reinterpret_cast<void**>(&header_host_), header_bytes, cudaHostAllocDefault));

  // Non-blocking communicator: initialisation proceeds in the background and is polled, so a
  // rank that never joins costs connect_timeout, not forever.
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  std::vector<int> all(peers_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  PT_CUDA_RETURN_IF_ERROR(
      ncclCommInitRankConfig(&comm_, options_.world_size, id, options_.rank, &config));
  PT_RETURN_IF_ERROR(AwaitComm(deadline, [&] {
    return absl::DeadlineExceededError(absl::StrCat(
        "rank ", options_.rank, ": the NCCL communicator (world of ", options_.world_size,
        ") was not complete after ", absl::FormatDuration(options_.connect_timeout),
        "; peer rank(s) ", PeerRanks(all), " (or other ranks) did not join or cannot be reached"));
  }));
  // First handshake: NCCL connects each pair at its first send/receive, which can wait for a
  // peer as long as joining could.
  if (peers_.empty()) return absl::OkStatus();
  std::vector<FrameHeader> hello(peers_.size(), EmptyHeader(false)), answers(peers_.size());
  PT_RETURN_IF_ERROR(ExchangeHeaders(all, hello, &answers, deadline, [&] {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", options_.rank, ": no first exchange with peer rank(s) ",
                     PeerRanks(all), " within ", absl::FormatDuration(options_.connect_timeout)));
  }));
  for (int i : all) {
    PT_RETURN_IF_ERROR(CheckReceivedHeader(answers[i], options_.max_message_bytes,
                                           absl::StrCat("rank ", peers_[i].rank)));
  }
  return absl::OkStatus();
}

NcclTransport::~NcclTransport() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  kernels::cuda::ScopedDevice scope(options_.device);
  if (comm_ != nullptr) {
    // A non-blocking communicator finalizes in the background; wait for it (bounded), then
    // destroy, or abort if a peer keeps it from finishing.
    absl::Status status = ToStatus(ncclCommFinalize(comm_), "ncclCommFinalize", __FILE__, __LINE__);
    if (status.ok()) {
      status = AwaitComm(absl::Now() + options_.peer_timeout,
                         [] { return absl::DeadlineExceededError("finalize"); });
    }
    if (status.ok()) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    } else {
      AbortComm();
    }
  }
  if (stream_ != nullptr) cudaStreamSynchronize(AsStream(stream_));
  for (PeerState& p : peers_) {
    for (Buffer* b : {&p.send_dev, &p.recv_dev}) {
      if (b->data != nullptr) cudaFreeAsync(b->data, AsStream(stream_));
    }
    for (Buffer* b : {&p.send_host, &p.recv_host}) {
      if (b->data != nullptr) cudaFreeHost(b->data);
    }
  }
  if (header_dev_ != nullptr) cudaFree(header_dev_);
  if (header_host_ != nullptr) cudaFreeHost(header_host_);
  if (event_ != nullptr) cudaEventDestroy(AsEvent(event_));
  if (stream_ != nullptr) {
    cudaStreamSynchronize(AsStream(stream_));
    cudaStreamDestroy(AsStream(stream_));
  }
}

void NcclTransport::AbortComm() {
  if (comm_ == nullptr) return;
  kernels::cuda::ScopedDevice scope(options_.device);
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

absl::Status NcclTransport::Send(int peer, Message message) {
  const int index = IndexOf(peer);
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", peer, " is not a peer of rank ", options_.rank));
  }
  PT_RETURN_IF_ERROR(CheckSendable(message, options_.max_message_bytes));
  PT_RETURN_IF_ERROR(mailbox_.LinkStatus(peer));
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  if (closed_[index]) {
    return absl::UnavailableError(absl::StrCat("rank ", peer, " finished its run"));
  }
  if (stop_) return absl::FailedPreconditionError("transport is shutting down");
  outboxes_[index].push_back(std::move(message));
  ++queued_;
  wake_ = true;
  return absl::OkStatus();
}

absl::StatusOr<Message> NcclTransport::Recv(int peer, const MessageKey& key, absl::Time deadline) {
  if (IndexOf(peer) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", peer, " is not a peer of rank ", options_.rank));
  }
  return mailbox_.Take(peer, key, deadline);
}

absl::Status NcclTransport::Flush(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (queued_ == 0 && in_flight_ == 0) || !failure_.ok();
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&drained), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat(queued_ + in_flight_, " message(s) still queued at the flush deadline"));
  }
  return failure_;
}

TransportStats NcclTransport::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void NcclTransport::Abort(absl::Status status) {
  abort_requested_.store(true);
  FailAll(status);
}

void NcclTransport::FailAll(absl::Status status) {
  mailbox_.FailAll(status);
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = std::move(status);
  for (auto& box : outboxes_) box.clear();
  queued_ = 0;
}

absl::Status NcclTransport::CheckHealthy() {
  if (abort_requested_.load()) return absl::CancelledError("transport aborted");
  ncclResult_t async = ncclSuccess;
  PT_CUDA_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &async));
  if (async != ncclSuccess && async != ncclInProgress) {
    return ToStatus(async, "an NCCL operation (ncclCommGetAsyncError)", __FILE__, __LINE__);
  }
  return absl::OkStatus();
}

absl::Status NcclTransport::AwaitComm(absl::Time deadline,
                                      const std::function<absl::Status()>& on_deadline) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    PT_CUDA_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      return ToStatus(state, "an NCCL operation (ncclCommGetAsyncError)", __FILE__, __LINE__);
    }
    if (abort_requested_.load()) return absl::CancelledError("transport aborted");
    if (absl::Now() > deadline) return on_deadline();
    PollPause();
  }
}

absl::Status NcclTransport::AwaitStream(absl::Time deadline,
                                        const std::function<absl::Status()>& on_deadline) {
  PT_CUDA_RETURN_IF_ERROR(cudaEventRecord(AsEvent(event_), AsStream(stream_)));
  while (true) {
    const cudaError_t err = cudaEventQuery(AsEvent(event_));
    if (err == cudaSuccess) return absl::OkStatus();
    if (err != cudaErrorNotReady) PT_CUDA_RETURN_IF_ERROR(err);
    PT_RETURN_IF_ERROR(CheckHealthy());
    if (absl::Now() > deadline) return on_deadline();
    PollPause();
  }
}

absl::Status NcclTransport::Group(const std::function<absl::Status()>& body, absl::Time deadline,
                                  const std::function<absl::Status()>& on_deadline) {
  PT_RETURN_IF_ERROR(CheckHealthy());
  PT_RETURN_IF_ERROR(RunNcclGroup(body));
  return AwaitComm(deadline, on_deadline);
}

absl::Status NcclTransport::GrowDevice(Buffer* buffer, int64_t bytes) {
  if (bytes <= buffer->capacity) return absl::OkStatus();
  const int64_t capacity = std::max(bytes, 2 * buffer->capacity);
  // Stream-ordered: after the previous round's use, and no device-wide synchronisation.
  if (buffer->data != nullptr)
    PT_CUDA_RETURN_IF_ERROR(cudaFreeAsync(buffer->data, AsStream(stream_)));
  buffer->data = nullptr;
  buffer->capacity = 0;
  PT_CUDA_RETURN_IF_ERROR(cudaMallocAsync(reinterpret_cast<void**>(&buffer->data),
                                          static_cast<size_t>(capacity), AsStream(stream_)));
  buffer->capacity = capacity;
  return absl::OkStatus();
}

absl::Status NcclTransport::GrowHost(Buffer* buffer, int64_t bytes) {
  if (bytes <= buffer->capacity) return absl::OkStatus();
  // Geometric: cudaFreeHost synchronises the device, so it happens a few times per run at most.
  // The buffer's last copy finished with its round (every round waits for its copies).
  const int64_t capacity = std::max(bytes, 2 * buffer->capacity);
  if (buffer->data != nullptr) PT_CUDA_RETURN_IF_ERROR(cudaFreeHost(buffer->data));
  buffer->data = nullptr;
  buffer->capacity = 0;
  PT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&buffer->data),
                                        static_cast<size_t>(capacity), cudaHostAllocDefault));
  buffer->capacity = capacity;
  return absl::OkStatus();
}

absl::Status NcclTransport::ExchangeHeaders(const std::vector<int>& active,
                                            const std::vector<FrameHeader>& send,
                                            std::vector<FrameHeader>* recv, absl::Time deadline,
                                            const std::function<absl::Status()>& on_deadline) {
  const int n = static_cast<int>(peers_.size());
  cudaStream_t stream = AsStream(stream_);
  char* my_dev = header_dev_;
  char* their_dev = header_dev_ + n * kHeaderBytes;
  char* my_host = header_host_;
  char* their_host = header_host_ + n * kHeaderBytes;
  // The previous round waited for its copies, so the pinned headers are free to overwrite.
  std::memcpy(my_host, send.data(), n * kHeaderBytes);
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(my_dev, my_host, n * kHeaderBytes, cudaMemcpyHostToDevice, stream));
  PT_RETURN_IF_ERROR(Group(
      [&]() -> absl::Status {
        for (int i : active) {
          PT_CUDA_RETURN_IF_ERROR(ncclSend(my_dev + i * kHeaderBytes, kHeaderBytes, ncclChar,
                                           peers_[i].rank, comm_, stream));
          PT_CUDA_RETURN_IF_ERROR(ncclRecv(their_dev + i * kHeaderBytes, kHeaderBytes, ncclChar,
                                           peers_[i].rank, comm_, stream));
        }
        return absl::OkStatus();
      },
      deadline, on_deadline));
  PT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(their_host, their_dev, n * kHeaderBytes, cudaMemcpyDeviceToHost, stream));
  PT_RETURN_IF_ERROR(AwaitStream(deadline, on_deadline));
  recv->resize(n);
  std::memcpy(recv->data(), their_host, n * kHeaderBytes);
  return absl::OkStatus();
}

absl::Status NcclTransport::Round(bool* moved) {
  *moved = false;
  const int n = static_cast<int>(peers_.size());
  // What goes out this round: the head of each open peer's queue (taken out of the queue, so
  // Abort clearing the queues cannot pull it from under us), or a bye when stopping.
  std::vector<Message> out_messages(n);
  std::vector<const Message*> out(n, nullptr);
  std::vector<FrameHeader> send_headers(n, EmptyHeader(false)), recv_headers(n);
  std::vector<int> active;
  {
    absl::MutexLock lock(&mu_);
    const bool bye = stop_ && queued_ == 0 && in_flight_ == 0;
    for (int i = 0; i < n; ++i) {
      if (peers_[i].done) continue;
      active.push_back(i);
      if (!outboxes_[i].empty()) {
        out_messages[i] = std::move(outboxes_[i].front());
        outboxes_[i].pop_front();
        out[i] = &out_messages[i];
        --queued_;
        ++in_flight_;
      }
      send_headers[i] = RoundHeader(out[i], bye);
    }
  }
  if (active.empty()) return absl::OkStatus();
  ++rounds_;
  const auto stuck = [this](const char* what) {
    return [this, what] {
      return absl::UnavailableError(
          absl::StrCat("no progress in ", what, " with the peers of rank ", options_.rank, " for ",
                       absl::FormatDuration(options_.peer_timeout), " (a peer is gone or stuck)"));
    };
  };
  PT_RETURN_IF_ERROR(ExchangeHeaders(active, send_headers, &recv_headers,
                                     absl::Now() + options_.peer_timeout,
                                     stuck("a header exchange")));

  // Payloads: sizes are known on both sides now. Outgoing bytes go to pinned memory, then
  // (queued on the stream) to the device.
  cudaStream_t stream = AsStream(stream_);
  std::vector<Message> in(n);
  bool any = false;
  for (int i : active) {
    PT_RETURN_IF_ERROR(CheckReceivedHeader(recv_headers[i], options_.max_message_bytes,
                                           absl::StrCat("rank ", peers_[i].rank)));
    PeerState& p = peers_[i];
    if (out[i] != nullptr && out[i]->bytes() > 0) {
      const int64_t bytes = out[i]->bytes();
      PT_RETURN_IF_ERROR(GrowHost(&p.send_host, bytes));
      PT_RETURN_IF_ERROR(GrowDevice(&p.send_dev, bytes));
      std::memcpy(p.send_host.data, out[i]->data.data(), static_cast<size_t>(bytes));
      PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.send_dev.data, p.send_host.data,
                                              static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                              stream));
      any = true;
    }
    const FrameHeader& h = recv_headers[i];
    if (HasMessage(h) && h.payload_bytes > 0) {
      PT_RETURN_IF_ERROR(GrowDevice(&p.recv_dev, static_cast<int64_t>(h.payload_bytes)));
      PT_RETURN_IF_ERROR(GrowHost(&p.recv_host, static_cast<int64_t>(h.payload_bytes)));
      any = true;
    }
  }
  if (any) {
    const absl::Time deadline = absl::Now() + options_.peer_timeout;
    PT_RETURN_IF_ERROR(Group(
        [&]() -> absl::Status {
          for (int i : active) {
            const PeerState& p = peers_[i];
            if (out[i] != nullptr && out[i]->bytes() > 0) {
              PT_CUDA_RETURN_IF_ERROR(ncclSend(p.send_dev.data,
                                               static_cast<size_t>(out[i]->bytes()), ncclChar,
                                               p.rank, comm_, stream));
            }
            const FrameHeader& h = recv_headers[i];
            if (HasMessage(h) && h.payload_bytes > 0) {
              PT_CUDA_RETURN_IF_ERROR(
                  ncclRecv(p.recv_dev.data, h.payload_bytes, ncclChar, p.rank, comm_, stream));
            }
          }
          return absl::OkStatus();
        },
        deadline, stuck("a payload exchange")));
    for (int i : active) {
      const FrameHeader& h = recv_headers[i];
      if (HasMessage(h) && h.payload_bytes > 0) {
        PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(peers_[i].recv_host.data, peers_[i].recv_dev.data,
                                                h.payload_bytes, cudaMemcpyDeviceToHost, stream));
      }
    }
    PT_RETURN_IF_ERROR(AwaitStream(deadline, stuck("a payload exchange")));
  }
  for (int i : active) {
    const FrameHeader& h = recv_headers[i];
    if (!HasMessage(h)) continue;
    Message& m = in[i];
    m.key = KeyOf(h);
    m.shape = ShapeOf(h);
    m.data.resize(h.payload_bytes / sizeof(float));
    if (h.payload_bytes > 0) std::memcpy(m.data.data(), peers_[i].recv_host.data, h.payload_bytes);
  }

  // Deliver, retire what was sent, and close pairs that said bye (either way) this round.
  int64_t sent_bytes = 0, received_bytes = 0, sent = 0, received = 0;
  for (int i : active) {
    const FrameHeader& h = recv_headers[i];
    const int peer = peers_[i].rank;
    if (HasMessage(h)) {
      if (PayloadChecksum(in[i].data) != h.checksum) {
        mailbox_.Fail(peer, absl::DataLossError(absl::StrCat(
                                "checksum mismatch on ", ToString(in[i].key), " from rank ", peer,
                                ": corrupted in transit, not consumed")));
      } else {
        received_bytes += static_cast<int64_t>(h.payload_bytes);
        ++received;
        mailbox_.Put(peer, std::move(in[i]));
      }
      *moved = true;
    }
    if (out[i] != nullptr) {
      sent_bytes += out[i]->bytes();
      ++sent;
      *moved = true;
    }
  }
  absl::MutexLock lock(&mu_);
  in_flight_ = 0;
  for (int i : active) {
    if (send_headers[i].magic == kByeMagic || recv_headers[i].magic == kByeMagic) {
      peers_[i].done = true;
      closed_[i] = true;
      if (recv_headers[i].magic == kByeMagic) {
        queued_ -= static_cast<int64_t>(outboxes_[i].size());
        outboxes_[i].clear();
        mailbox_.Fail(peers_[i].rank, absl::UnavailableError(absl::StrCat("rank ", peers_[i].rank,
                                                                          " finished its run")));
      }
    }
  }
  stats_.sent_bytes += sent_bytes;
  stats_.sent_messages += sent;
  stats_.received_bytes += received_bytes;
  stats_.received_messages += received;
  return absl::OkStatus();
}

void NcclTransport::Loop() {
  // This thread's current device (the CUDA device is per thread).
  if (cudaSetDevice(options_.device) != cudaSuccess) {
    FailAll(absl::InternalError("cudaSetDevice failed on the transport thread"));
    AbortComm();
    return;
  }
  IdleBackoff backoff(options_.idle_sleep, options_.idle_sleep_max);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) break;
      bool all_done = true;
      for (const PeerState& p : peers_) all_done = all_done && p.done;
      if (stop_ && all_done) return;
    }
    bool moved = false;
    if (absl::Status status = Round(&moved); !status.ok()) {
      FailAll(status);
      break;
    }
    if (moved) {
      backoff.Reset();
      continue;
    }
    // Nothing moved: sleep (longer each time) unless a Send, Abort or shutdown comes first.
    const absl::Duration sleep = backoff.Next();
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return wake_ || stop_ || !failure_.ok();
    };
    mu_.AwaitWithTimeout(absl::Condition(&woken), sleep);
    if (wake_) {
      wake_ = false;
      backoff.Reset();
    }
  }
  // Failed or aborted: the communicator may be stuck mid-operation; abort it.
  AbortComm();
}

}  // namespace pipetrain::worker
