#!/usr/bin/env python3
"""Writes the case list for gen_fingerprint (one "NAME P M B W COMM LIMIT" per line, F = 1):
the V generators and auto over p 2..64, m up to 1024, five cost settings, with and without
memory limits, plus the other real-cost generators at fewer cells. Usage:
  bench/schedule/make_fingerprint_cases.py > /tmp/cases.txt
  build-rel/bench/schedule/gen_fingerprint --cases /tmp/cases.txt > before.txt
"""

COSTS = [(1, 1, 0), (1, 1, 0.1), (2, 1, 0.2), (1.5, 0.5, 0.2), (1.5, 0.5, 0)]
PS = [2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64]


def ms(p):
    out = sorted({m for m in (1, p, 2 * p + 1, 3 * p, 12 * p, 1024 if p >= 16 else 0) if 1 <= m <= 1024})
    return out


def main():
    lines = []
    for p in PS:
        for m in ms(p):
            for b, w, c in COSTS:
                cell = f"{p} {m} {b} {w} {c}"
                for name in ("v-min", "v-half", "v-zb", "zb-v"):
                    lines.append(f"{name} {cell} 0")
                for lim in (max(2, p // 3 + 1), p // 2 + 2, p):
                    lines.append(f"v-adaptive {cell} {lim}")
                lines.append(f"v-half {cell} {max(2, p // 3)}")
                lines.append(f"auto {cell} 0")
                lines.append(f"auto {cell} {p // 2 + 2}")
                if m >= p and p in (4, 8, 16, 32, 64):
                    for name in ("zb-h1", "zb-h2", "interleaved-zb", "dualpipev", "1f1b",
                                 "interleaved-1f1b"):
                        lines.append(f"{name} {cell} 0")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
