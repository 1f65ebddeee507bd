#include "worker/transport/nccl_transport.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_check.h"
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

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

cudaStream_t AsStream(void* s) { return static_cast<cudaStream_t>(s); }

// What this rank announces to a peer for one round: a message, a bye, or nothing.
FrameHeader RoundHeader(const Message* m, bool bye) {
  if (m == nullptr) return EmptyHeader(bye);
  FrameHeader h = MessageHeader(*m);
  h.flags |= kFrameChecksumInHeader;
  h.checksum = PayloadChecksum(m->data);
  return h;
}

absl::Status Grow(char** buf, int64_t* capacity, int64_t bytes) {
  if (bytes <= *capacity) return absl::OkStatus();
  if (*buf != nullptr) PT_CUDA_RETURN_IF_ERROR(cudaFree(*buf));
  *buf = nullptr;
  *capacity = 0;
  PT_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(buf), static_cast<size_t>(bytes)));
  *capacity = bytes;
  return absl::OkStatus();
}

}  // namespace

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
  PT_RETURN_IF_ERROR(transport->Init());
  transport->thread_ = std::thread([t = transport.get()] { t->Loop(); });
  return transport;
}

absl::Status NcclTransport::Init() {
  PT_ASSIGN_OR_RETURN(ncclUniqueId id, ParseNcclUniqueId(options_.unique_id));
  PT_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  cudaStream_t stream = nullptr;
  PT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  PT_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&header_dev_),
                                     std::max<size_t>(1, 2 * peers_.size()) * kHeaderBytes));
  PT_CUDA_RETURN_IF_ERROR(ncclCommInitRank(&comm_, options_.world_size, id, options_.rank));
  return absl::OkStatus();
}

NcclTransport::~NcclTransport() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  for (PeerState& p : peers_) {
    if (p.send_buf != nullptr) cudaFree(p.send_buf);
    if (p.recv_buf != nullptr) cudaFree(p.recv_buf);
  }
  if (header_dev_ != nullptr) cudaFree(header_dev_);
  if (stream_ != nullptr) cudaStreamDestroy(AsStream(stream_));
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
  FailAll(status);
  abort_requested_.store(true);
}

void NcclTransport::FailAll(absl::Status status) {
  mailbox_.FailAll(status);
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = std::move(status);
  for (auto& box : outboxes_) box.clear();
  queued_ = 0;
}

absl::Status NcclTransport::WaitStream(absl::string_view what) {
  const absl::Time deadline = absl::Now() + options_.peer_timeout;
  while (true) {
    const cudaError_t err = cudaStreamQuery(AsStream(stream_));
    if (err == cudaSuccess) return absl::OkStatus();
    if (err != cudaErrorNotReady) {
      PT_CUDA_RETURN_IF_ERROR(err);
    }
    ncclResult_t async = ncclSuccess;
    PT_CUDA_RETURN_IF_ERROR(ncclCommGetAsyncError(comm_, &async));
    PT_CUDA_RETURN_IF_ERROR(async);
    if (abort_requested_.load()) return absl::CancelledError("transport aborted");
    if (absl::Now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("no progress in ", what, " with the peers of rank ", options_.rank, " for ",
                       absl::FormatDuration(options_.peer_timeout), " (a peer is gone or stuck)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(5));
  }
}

absl::Status NcclTransport::Round(bool* moved) {
  *moved = false;
  const int n = static_cast<int>(peers_.size());
  // What goes out this round: the head of each open peer's queue (taken out of the queue, so
  // Abort clearing the queues cannot pull it from under us), or a bye when stopping.
  std::vector<Message> out_messages(n);
  std::vector<const Message*> out(n, nullptr);
  std::vector<FrameHeader> send_headers(n), recv_headers(n);
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
  cudaStream_t stream = AsStream(stream_);
  char* my_headers = header_dev_;
  char* their_headers = header_dev_ + n * kHeaderBytes;
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(my_headers, send_headers.data(), n * kHeaderBytes,
                                          cudaMemcpyHostToDevice, stream));
  PT_CUDA_RETURN_IF_ERROR(ncclGroupStart());
  for (int i : active) {
    PT_CUDA_RETURN_IF_ERROR(ncclSend(my_headers + i * kHeaderBytes, kHeaderBytes, ncclChar,
                                     peers_[i].rank, comm_, stream));
    PT_CUDA_RETURN_IF_ERROR(ncclRecv(their_headers + i * kHeaderBytes, kHeaderBytes, ncclChar,
                                     peers_[i].rank, comm_, stream));
  }
  PT_CUDA_RETURN_IF_ERROR(ncclGroupEnd());
  PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(recv_headers.data(), their_headers, n * kHeaderBytes,
                                          cudaMemcpyDeviceToHost, stream));
  PT_RETURN_IF_ERROR(WaitStream("a header exchange"));

  // Payloads: sizes are known on both sides now.
  std::vector<Message> in(n);
  bool any = false;
  for (int i : active) {
    PT_RETURN_IF_ERROR(CheckReceivedHeader(recv_headers[i], options_.max_message_bytes,
                                           absl::StrCat("rank ", peers_[i].rank)));
    PeerState& p = peers_[i];
    if (out[i] != nullptr && out[i]->bytes() > 0) {
      PT_RETURN_IF_ERROR(Grow(&p.send_buf, &p.send_capacity, out[i]->bytes()));
      PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.send_buf, out[i]->data.data(), out[i]->bytes(),
                                              cudaMemcpyHostToDevice, stream));
      any = true;
    }
    const FrameHeader& h = recv_headers[i];
    if (HasMessage(h) && h.payload_bytes > 0) {
      PT_RETURN_IF_ERROR(
          Grow(&p.recv_buf, &p.recv_capacity, static_cast<int64_t>(h.payload_bytes)));
      any = true;
    }
  }
  if (any) {
    PT_CUDA_RETURN_IF_ERROR(ncclGroupStart());
    for (int i : active) {
      const PeerState& p = peers_[i];
      if (out[i] != nullptr && out[i]->bytes() > 0) {
        PT_CUDA_RETURN_IF_ERROR(ncclSend(p.send_buf, static_cast<size_t>(out[i]->bytes()), ncclChar,
                                         p.rank, comm_, stream));
      }
      const FrameHeader& h = recv_headers[i];
      if (HasMessage(h) && h.payload_bytes > 0) {
        PT_CUDA_RETURN_IF_ERROR(
            ncclRecv(p.recv_buf, h.payload_bytes, ncclChar, p.rank, comm_, stream));
      }
    }
    PT_CUDA_RETURN_IF_ERROR(ncclGroupEnd());
  }
  for (int i : active) {
    const FrameHeader& h = recv_headers[i];
    if (!HasMessage(h)) continue;
    Message& m = in[i];
    m.key = KeyOf(h);
    m.shape = ShapeOf(h);
    m.data.resize(h.payload_bytes / sizeof(float));
    if (h.payload_bytes > 0) {
      PT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.data.data(), peers_[i].recv_buf, h.payload_bytes,
                                              cudaMemcpyDeviceToHost, stream));
    }
  }
  if (any) PT_RETURN_IF_ERROR(WaitStream("a payload exchange"));

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
  if (cudaSetDevice(options_.device) != cudaSuccess) {
    FailAll(absl::InternalError("cudaSetDevice failed on the transport thread"));
    return;
  }
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
    if (!moved) std::this_thread::sleep_for(absl::ToChronoMicroseconds(options_.idle_sleep));
  }
  // Failed or aborted: the communicator may be stuck mid-operation; abort it.
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
}

}  // namespace pipetrain::worker
