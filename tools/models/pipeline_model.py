#!/usr/bin/env python3
"""A fluid model of the pipelined reduce_scatter's schedule on n GPUs (src/collectives/pipeline.cpp), no host.

Why: on four H200s pickle's reduce_scatter moves ~225 GB/s busbw where the same copies could reach ~390, and neither
the reduction kernel's speed nor its interference with the copies explains it (docs/results/2026-11-28f-h200x4.md).
The model asks what the schedule itself does when the ranks do not start in step.

Each GPU has one side stream that copies chunk k to peers r+1, r+2, ... in turn (staggered) and a main stream that
consumes chunk k (for R ms) once every peer's copy of it landed. A copy into a scratch stage waits until the
receiver consumed the chunk that last used it (4 stages); a call's first copy waits until the rank consumed its
previous call's last chunk (`fork`: pickle's side streams start after the caller's stream at each call). Copies share bandwidth max-min fairly: each copy at most
`per_copy` GB/s, each GPU's egress and ingress at most `port` GB/s. `offsets` delays each rank's first copy;
`ordered` makes each copy into a peer wait until the peer received the copy before it in the schedule (pickle's
PICKLE_PIPELINE_SCHEDULE=ordered). Durations measured on H200s: a 64 MiB copy at 388 GB/s, the reduction of 4
inputs at 8 CTAs 0.304 ms per 64 MiB, of 2 inputs 0.217 ms (tools/probes/copy_under_reduce_probe).

Measured afterwards (docs/results/2026-11-28g-h200x2.md): staggered 226-230, ordered 337-338 GB/s busbw at 2 GiB on
four H200s, as the model says; ordered became the default.

Usage: python3 tools/models/pipeline_model.py     (prints the table docs/collectives.md quotes)
"""


def simulate(n=4, chunk_mb=64, chunks=8, calls=3, reduce_ms=0.304, per_copy=388.0, port=400.0, stages=4,
             offsets=None, ordered=False, fork=True):
    """Returns (ms per call, busbw GB/s as nccl-tests' reduce_scatter)."""
    size = chunk_mb * 1048576 / 1e9  # GB per copy
    total = chunks * calls
    offsets = [o / 1000.0 for o in (offsets or [0.0] * n)]  # ms -> s
    order = {r: [(g, (r + s) % n) for g in range(total) for s in range(1, n)] for r in range(n)}
    next_op = {r: 0 for r in range(n)}
    consumed = {r: set() for r in range(n)}
    arrived = {r: {} for r in range(n)}  # chunk -> senders whose copy landed
    next_chunk = {r: 0 for r in range(n)}
    busy_until = {r: None for r in range(n)}
    active = {}  # (sender, chunk, receiver) -> GB left
    t = 0.0

    def copy_ready(r):
        if next_op[r] >= len(order[r]) or t < offsets[r] - 1e-15 or any(k[0] == r for k in active):
            return False
        g, p = order[r][next_op[r]]
        if g >= stages and g - stages not in consumed[p]:
            return False
        if fork and g % chunks == 0 and g > 0 and g - 1 not in consumed[r]:
            return False
        if ordered:
            s = (p - r) % n
            before = (g, (p - s + 1) % n) if s > 1 else ((g - 1, (p + 1) % n) if g > 0 else None)
            if before and before[1] not in arrived[p].get(before[0], ()):
                return False
        return True

    def consume_ready(r):
        g = next_chunk[r]
        return g < total and busy_until[r] is None and len(arrived[r].get(g, ())) == n - 1

    while True:
        for r in range(n):
            if copy_ready(r):
                g, p = order[r][next_op[r]]
                next_op[r] += 1
                active[(r, g, p)] = size
            if consume_ready(r):
                busy_until[r] = t + reduce_ms / 1000.0
        waiting = [o for o in offsets if o > t + 1e-15]
        if not active and all(b is None for b in busy_until.values()) and not waiting:
            break
        rates, unfixed = {}, set(active)
        out_left, in_left = {r: port for r in range(n)}, {r: port for r in range(n)}
        while unfixed:  # max-min fair shares
            share = {k: min(per_copy, out_left[k[0]] / sum(1 for q in unfixed if q[0] == k[0]),
                            in_left[k[2]] / sum(1 for q in unfixed if q[2] == k[2])) for k in unfixed}
            low = min(share.values())
            for k in [k for k in unfixed if share[k] <= low + 1e-9]:
                rates[k] = low
                out_left[k[0]] -= low
                in_left[k[2]] -= low
                unfixed.discard(k)
        steps = [active[k] / rates[k] for k in active] + [b - t for b in busy_until.values() if b is not None]
        steps += [o - t for o in waiting]
        dt = min(steps)
        t += dt
        for k in list(active):
            active[k] -= rates[k] * dt
            if active[k] <= 1e-12:
                del active[k]
                arrived[k[2]].setdefault(k[1], set()).add(k[0])
        for r in range(n):
            if busy_until[r] is not None and busy_until[r] <= t + 1e-15:
                consumed[r].add(next_chunk[r])
                busy_until[r] = None
                next_chunk[r] += 1
    ms = t / calls * 1000
    busbw = n * chunks * size / (ms / 1000) * (n - 1) / n
    return ms, busbw


if __name__ == "__main__":
    print("# 4 ranks, 512 MiB blocks in 8 chunks of 64 MiB, 3 calls; busbw GB/s, staggered / ordered")
    for label, offsets in [("all in step", None), ("ranks 0.05 ms apart", [0, 0.05, 0.10, 0.15]),
                           ("two ranks 0.1 ms late", [0, 0.1, 0, 0.1]), ("one rank 0.3 ms late", [0.3, 0, 0, 0]),
                           ("ranks up to 1 ms apart", [0, 1.0, 0.5, 0.2])]:
        row = []
        for reduce_ms in (0.304, 0.096):
            for ordered in (False, True):
                row.append(simulate(reduce_ms=reduce_ms, offsets=offsets, ordered=ordered)[1])
        print(f"{label:24s} reduce 8 CTAs {row[0]:6.1f} / {row[1]:6.1f}   32 CTAs {row[2]:6.1f} / {row[3]:6.1f}")
    for reduce_ms, label in ((0.217, "8 CTAs"), (0.11, "16 CTAs")):
        ms, busbw = simulate(n=2, reduce_ms=reduce_ms)
        print(f"2 ranks, 1 GiB, reduction at {label}: {ms:.2f} ms per call, busbw {busbw:.1f}")
