// CostModel: how long each action takes and how much activation memory it holds, per stage.
//
// Time units are arbitrary but consistent (seconds for real models, "slots" for unit costs).
// Memory is in "units" unless `bytes_per_unit` is set: one unit is one microbatch's activations
// for a whole worker's share of layers, so with v chunks per worker a chunk holds 1/v unit.
//
// Memory model (stated once, used by the simulator and every planner): F allocates
// `activation` for its (stage, microbatch); B releases `freed_by_b` of it; W releases the rest;
// BW releases all of it. With freed_by_b = 0 this is the papers' figure accounting ("+1 at F,
// -1 at W"), the default. OFFLOAD releases what is still held on the device; RELOAD takes it back.
//
// Host link (activation offload). OFFLOAD(s,i) copies stage s's stored activations device ->
// host on the worker's D2H copy engine, RELOAD host -> device on its H2D engine; each engine runs
// its copies one at a time in issue order, and with `duplex` = false both directions share one
// engine. Copy time = fixed `offload` / `reload` + OffloadBytes(s) / bandwidth (the bandwidth
// term only when set). The device copy of an offloaded stash is released at the end of the
// worker's next compute action: there the executor waits for every copy issued before that
// action (stalling if one is late) and frees the device buffers, so device memory is a function
// of action order only and a runtime measures exactly what is simulated. At the end of the list
// a copy releases at its end. RELOAD allocates at its issue.
//
// Thread-safety: value type.
#ifndef PIPETRAIN_SCHEDULE_COST_MODEL_H_
#define PIPETRAIN_SCHEDULE_COST_MODEL_H_

#include <vector>

namespace pipetrain::schedule {

struct StageCost {
  double f = 1.0;           // forward time
  double b = 1.0;           // backward-input time
  double w = 1.0;           // backward-weight time
  double bw = -1.0;         // fused backward time; < 0 means b + w
  double activation = 1.0;  // memory held after F (units)
  double freed_by_b = 0.0;  // part of `activation` released by B (0 <= freed_by_b <= activation)
  // Bytes OFFLOAD moves for one microbatch of this stage; < 0 = activation * bytes_per_unit
  // (activation itself when bytes_per_unit is 0, bandwidths then being in units/s).
  double offload_bytes = -1.0;

  double FusedBackward() const { return bw < 0 ? b + w : bw; }
};

struct CostModel {
  std::vector<StageCost> stages;  // indexed by stage
  // Time of one activation or gradient message between stages on different workers
  // (latency + bytes / bandwidth). Transfers between stages on the same worker cost nothing.
  double comm = 0.0;
  // Bytes per memory unit, for reporting in bytes; 0 when the model is abstract.
  double bytes_per_unit = 0.0;
  // Offload: time to move one stage's stored activations to host (and back); 0 = instant.
  double offload = 0.0;
  double reload = 0.0;
  // Host link bandwidth per direction (bytes/s; units/s for abstract models); 0 = no term.
  double d2h_bytes_per_s = 0.0;
  double h2d_bytes_per_s = 0.0;
  // Whether D2H and H2D copies run at the same time (two copy engines, full-duplex link).
  bool duplex = true;

  double OffloadBytes(int stage) const;
  double OffloadTime(int stage) const;  // one OFFLOAD copy of `stage`, queueing excluded
  double ReloadTime(int stage) const;
};

// Costs given for a worker's whole share of layers (the `--costs f,b,w` convention), spread
// evenly over `chunks_per_worker` chunks: each of the p*v stages gets f/v, b/v, w/v and holds
// 1/v unit of activation memory.
CostModel UniformCostModel(int num_workers, int chunks_per_worker, double f, double b, double w,
                           double comm = 0.0);

// Per worker: the least activation memory x time one microbatch holds there, sum over the
// worker's stages s of a_s x L_s, where L_s is the chain from stage s's F to its B (the F's and
// B's of stages s..n-1, and a transfer each way between stages on different workers): stage s's
// activation is allocated when its F starts and not freed before its B ends. So on a worker
// whose memory never passes `peak`, m microbatches span at least m x this / peak (the memory
// integrates over the span to at least m x this, and to at most peak x span), for any order
// and with or without W's; not with offload (activation leaves before the B). Empty when the
// placement does not match the costs or a cost is negative.
std::vector<double> ChainMemoryTime(const CostModel& costs, const std::vector<int>& stage_to_worker,
                                    int num_workers);

}  // namespace pipetrain::schedule

#endif  // PIPETRAIN_SCHEDULE_COST_MODEL_H_
