// WorkerRegistry: registration (validation, stable ids by name), heartbeats, lost detection,
// acquire/release.
#include "coordinator/worker_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/test_util.h"

namespace pipetrain::coordinator {
namespace {

using ::testing::HasSubstr;

WorkerRegistration Valid() {
  WorkerRegistration r;
  r.name = "pod-a";
  r.address = "127.0.0.1:5000";
  r.device = v1::DEVICE_KIND_CPU;
  return r;
}

TEST(WorkerRegistryTest, ValidatesEveryField) {
  WorkerRegistry registry({});
  struct Case {
    std::function<void(WorkerRegistration&)> mutate;
    const char* field;
  };
  const std::vector<Case> cases = {
      {[](WorkerRegistration& r) { r.address = ""; }, "address"},
      {[](WorkerRegistration& r) { r.address = "nohost"; }, "address"},
      {[](WorkerRegistration& r) { r.address = "h:0"; }, "address"},
      {[](WorkerRegistration& r) { r.address = "h:70000"; }, "address"},
      // Hosts that are no host: a path, empty labels, spaces, a bad IPv6 literal.
      {[](WorkerRegistration& r) { r.address = "../../etc/passwd:22"; }, "address"},
      {[](WorkerRegistration& r) { r.address = "a..b:22"; }, "address"},
      {[](WorkerRegistration& r) { r.address = "host name:22"; }, "address"},
      {[](WorkerRegistration& r) { r.address = "[fe80::1%eth0]:22"; }, "address"},
      {[](WorkerRegistration& r) { r.transport_address = "w/1:7000"; }, "transport_address"},
      {[](WorkerRegistration& r) { r.transport_address = "x"; }, "transport_address"},
      {[](WorkerRegistration& r) { r.metrics_address = ":1"; }, "metrics_address"},
      {[](WorkerRegistration& r) { r.device = v1::DEVICE_KIND_UNSPECIFIED; }, "device"},
      {[](WorkerRegistration& r) { r.device = static_cast<v1::DeviceKind>(77); }, "device"},
      {[](WorkerRegistration& r) { r.device_memory_bytes = -1; }, "device_memory_bytes"},
      {[](WorkerRegistration& r) { r.host_memory_bytes = -1; }, "host_memory_bytes"},
      {[](WorkerRegistration& r) { r.d2h_bytes_per_s = -1; }, "d2h_bytes_per_s"},
      {[](WorkerRegistration& r) { r.h2d_bytes_per_s = NAN; }, "h2d_bytes_per_s"},
      {[](WorkerRegistration& r) { r.name = std::string(300, 'n'); }, "name"},
      {[](WorkerRegistration& r) { r.host = std::string(300, 'h'); }, "host"},
      {[](WorkerRegistration& r) { r.cpu_cores = -1; }, "cpu_cores"},
      {[](WorkerRegistration& r) { r.compute_threads = 1 << 20; }, "compute_threads"},
  };
  for (const Case& c : cases) {
    WorkerRegistration r = Valid();
    c.mutate(r);
    absl::StatusOr<std::string> id = registry.Register(r);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(id.status().message(), HasSubstr(c.field));
  }
  EXPECT_TRUE(registry.List().empty());
}

TEST(WorkerRegistryTest, HostPortAcceptsNamesAndAddresses) {
  for (const char* ok : {"127.0.0.1:7070", "[::1]:7070", "[2001:db8::8a2e:370:7334]:1",
                         "worker-3.pipetrain.default.svc.cluster.local:7071", "my_host:65535"}) {
    EXPECT_TRUE(IsHostPort(ok)) << ok;
  }
  for (const char* bad : {"127.0.0.1", ":7070", "[]:7070", ".example:1", "example.:1",
                          "exa\nmple:1", "../x:1", "h:0", "h:65536", "h:-1", "[::1:7070"}) {
    EXPECT_FALSE(IsHostPort(bad)) << bad;
  }
}

TEST(WorkerRegistryTest, ReRegisteringKeepsTheId) {
  WorkerRegistry registry({});
  const std::string a = registry.Register(Valid()).value();
  WorkerRegistration other = Valid();
  other.name = "pod-b";
  other.address = "127.0.0.1:5001";
  const std::string b = registry.Register(other).value();
  EXPECT_NE(a, b);
  // Restarted at the same address: the same id at once.
  EXPECT_EQ(registry.Register(Valid()).value(), a);
  // Moved: the name is re-bound once its live holder has left (or missed its heartbeats).
  WorkerRegistration moved = Valid();
  moved.address = "127.0.0.1:6000";
  registry.Heartbeat(a, "", /*leaving=*/true);
  EXPECT_EQ(registry.Register(moved).value(), a);
  EXPECT_EQ(registry.List()[0].registration.address, "127.0.0.1:6000");
  EXPECT_EQ(registry.List().size(), 2u);
}

// A name held by a live worker is not re-bound to another address: a spoofed registration
// would otherwise redirect that worker's jobs for good.
TEST(WorkerRegistryTest, LiveWorkersNameIsNotReboundElsewhere) {
  WorkerRegistry registry({absl::Milliseconds(200)});
  const std::string a = registry.Register(Valid()).value();
  WorkerRegistration impostor = Valid();
  impostor.address = "10.0.0.66:7071";
  absl::StatusOr<std::string> refused = registry.Register(impostor);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("is held by a live worker at " + Valid().address));
  EXPECT_EQ(registry.Get(a)->registration.address, Valid().address);
  // Silent past the heartbeat timeout: gone, so the name moves.
  absl::SleepFor(absl::Milliseconds(250));
  EXPECT_EQ(registry.Register(impostor).value(), a);
  EXPECT_EQ(registry.Get(a)->registration.address, "10.0.0.66:7071");
}

// With credentials issued, each registration gets fresh, distinct tokens; the registry finds a
// worker by its session token and the coordinator token by the worker's address.
TEST(WorkerRegistryTest, IssuesCredentialsPerRegistration) {
  WorkerRegistry plain({});
  const std::string p = plain.Register(Valid()).value();
  EXPECT_TRUE(plain.Get(p)->session_token.empty());
  EXPECT_EQ(plain.CoordinatorTokenFor(Valid().address), "");

  WorkerRegistry registry({.issue_credentials = true});
  const std::string a = registry.Register(Valid()).value();
  const WorkerInfo first = *registry.Get(a);
  EXPECT_EQ(first.session_token.size(), 64u);
  EXPECT_EQ(first.coordinator_token.size(), 64u);
  EXPECT_NE(first.session_token, first.coordinator_token);
  EXPECT_EQ(registry.WorkerWithSessionToken(first.session_token), a);
  EXPECT_EQ(registry.CoordinatorTokenFor(Valid().address), first.coordinator_token);
  EXPECT_FALSE(registry.WorkerWithSessionToken("").has_value());
  EXPECT_FALSE(registry.WorkerWithSessionToken(first.coordinator_token).has_value());
  // A re-registration replaces both: the old session token is worth nothing.
  ASSERT_EQ(registry.Register(Valid()).value(), a);
  const WorkerInfo second = *registry.Get(a);
  EXPECT_NE(second.session_token, first.session_token);
  EXPECT_FALSE(registry.WorkerWithSessionToken(first.session_token).has_value());
  EXPECT_EQ(registry.WorkerWithSessionToken(second.session_token), a);
}

TEST(WorkerRegistryTest, HeartbeatsAndLostWorkers) {
  WorkerRegistry registry({absl::Milliseconds(100)});
  std::vector<std::string> lost;
  registry.SetListeners(
      [&](const std::string& w, const std::string& job, const std::string& reason) {
        lost.push_back(w + "/" + job + "/" + reason);
      },
      nullptr);
  EXPECT_TRUE(registry.Heartbeat("worker-999999", "").reregister);
  const std::string a = registry.Register(Valid()).value();
  EXPECT_FALSE(registry.Heartbeat(a, "").reregister);
  auto taken = registry.Acquire(1, "job-000001").value();
  EXPECT_EQ(taken[0].id, a);
  EXPECT_EQ(registry.CountByState().busy, 1);
  EXPECT_FALSE(registry.Acquire(1, "job-000002").ok());
  // A job the worker should not run is aborted.
  EXPECT_THAT(registry.Heartbeat(a, "job-000007").abort_job_ids,
              ::testing::ElementsAre("job-000007"));
  EXPECT_TRUE(registry.Heartbeat(a, "job-000001").abort_job_ids.empty());
  absl::SleepFor(absl::Milliseconds(150));
  registry.ExpireLost();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_THAT(lost[0], HasSubstr("job-000001"));
  EXPECT_THAT(lost[0], HasSubstr("missed heartbeats"));
  EXPECT_EQ(registry.CountByState().lost, 1);
  // Back before the job released it: stays lost; after the release it is idle again.
  registry.Heartbeat(a, "");
  EXPECT_EQ(registry.CountByState().lost, 1);
  registry.Release("job-000001");
  registry.Heartbeat(a, "");
  EXPECT_EQ(registry.CountByState().idle, 1);
  EXPECT_EQ(registry.heartbeat_interval(), absl::Milliseconds(20));
}

TEST(WorkerRegistryTest, LeavingAndUnreachableWorkersAreLost) {
  WorkerRegistry registry({absl::Seconds(30)});
  std::vector<std::string> lost;
  registry.SetListeners(
      [&](const std::string& w, const std::string& job, const std::string& reason) {
        lost.push_back(w + "/" + job + "/" + reason);
      },
      nullptr);
  WorkerRegistration second = Valid();
  second.name = "second";
  second.address = "127.0.0.1:6001";
  const std::string a = registry.Register(Valid()).value();
  const std::string b = registry.Register(second).value();
  registry.Acquire(2, "job-000001").value();
  // Leaving (SIGTERM) while busy: lost at once, and its job hears of it.
  EXPECT_FALSE(registry.Heartbeat(a, "job-000001", /*leaving=*/true).reregister);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_THAT(lost[0], HasSubstr(a + "/job-000001/"));
  EXPECT_THAT(lost[0], HasSubstr("shutting down"));
  // Unreachable: lost without a listener call; not acquired after the release.
  registry.MarkLost(b);
  EXPECT_EQ(lost.size(), 1u);
  EXPECT_EQ(registry.CountByState().lost, 2);
  registry.Release("job-000001");
  EXPECT_FALSE(registry.Acquire(1, "job-000002").ok());
  // A heartbeat brings the unreachable one back.
  registry.Heartbeat(b, "");
  EXPECT_EQ(registry.Acquire(1, "job-000002").value()[0].id, b);
  // An unknown worker that is leaving is not asked to register again.
  EXPECT_FALSE(registry.Heartbeat("worker-999999", "", /*leaving=*/true).reregister);
}

// Ids restart with a new coordinator: a worker still heartbeating with its old id may name a
// worker the new one registered. Its name gives it away: it is asked to register again, and the
// other worker's entry is untouched (not kept alive, not marked leaving).
TEST(WorkerRegistryTest, HeartbeatWithAnotherWorkersIdMustReregister) {
  WorkerRegistry registry({absl::Milliseconds(100)});
  std::vector<std::string> lost;
  registry.SetListeners(
      [&](const std::string& w, const std::string&, const std::string&) { lost.push_back(w); },
      nullptr);
  WorkerRegistration b = Valid();
  b.name = "w1";
  const std::string id = registry.Register(b).value();
  // "w0" held the same id under the previous coordinator.
  EXPECT_TRUE(registry.Heartbeat(id, "", false, "w0").reregister);
  EXPECT_FALSE(registry.Heartbeat(id, "", true, "w0").reregister);  // leaving: nothing to do
  EXPECT_EQ(registry.CountByState().lost, 0) << "w0 leaving must not make w1 lost";
  EXPECT_TRUE(lost.empty());
  // Its own name (or none, for old workers) is the ordinary heartbeat.
  EXPECT_FALSE(registry.Heartbeat(id, "", false, "w1").reregister);
  EXPECT_FALSE(registry.Heartbeat(id, "").reregister);
  absl::SleepFor(absl::Milliseconds(150));
  registry.Heartbeat(id, "", false, "w0");  // does not count as w1's heartbeat
  registry.ExpireLost();
  EXPECT_EQ(registry.CountByState().lost, 1);
}

}  // namespace
}  // namespace pipetrain::coordinator
