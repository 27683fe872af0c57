#!/usr/bin/env python3
"""Random matmul shapes for jitmm-bench --shapes: the off-suite sweeps of bench/RESULTS.md.

usage: bench/random_shapes.py SEED COUNT DTYPE > shapes.csv   (DTYPE: f32, bf16, s8, u8 (x s8), f16)

M, N and K log-uniform in [1, 4096]; A stored K x M in 20% of the shapes, B stored N x K in half; 40% batched
(log-uniform up to 64); only shapes of 1e4 to 4e9 flops in all.
"""
import math
import random
import sys


def main():
    seed, count, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    a_type, b_type, c_type = {'f32': ('f32', 'f32', 'f32'), 'bf16': ('bf16', 'bf16', 'f32'),
                              's8': ('s8', 's8', 's32'), 'u8': ('u8', 's8', 's32'),
                              'f16': ('f16', 'f16', 'f32')}[dtype]
    print('m,n,k,trans_a,trans_b,batch_count,a_type,b_type,c_type')
    written = 0
    while written < count:
        m, n, k = (max(1, int(math.exp(rng.uniform(0, math.log(4096))))) for _ in range(3))
        trans_a = 1 if rng.random() < 0.2 else 0
        trans_b = 1 if rng.random() < 0.5 else 0
        batch = 1 if rng.random() < 0.6 else max(1, int(math.exp(rng.uniform(0, math.log(64)))))
        flops = 2.0 * m * n * k * batch
        if flops < 1e4 or flops > 4e9:
            continue
        print(f'{m},{n},{k},{trans_a},{trans_b},{batch},{a_type},{b_type},{c_type}')
        written += 1


if __name__ == '__main__':
    main()
