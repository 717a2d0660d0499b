/*
 * test_hw.h — a made-up hardware file for the planner, so that tests which
 * plan measure nothing: a disk with 20K IOPS per queue slot, 15 GB/s of
 * memory bandwidth per thread, 2.5 us of CPU per read, reads as fast with the
 * cores computing, kernels at fixed speeds for the types the engine runs.
 */
#ifndef PI_TEST_HW_H
#define PI_TEST_HW_H

#include "kernels/kernels.h"
#include "plan/hwprobe.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static inline bool t_write_hw(const char *path) {
    pi_hw hw;
    memset(&hw, 0, sizeof hw);
    hw.n_threads = 2;
    for (int t = 1; t <= 2; t++) {
        hw.mem_bw[t] = 15.0 * t;
        for (int y = 0; y < PI_TYPE_COUNT; y++) {
            if (y != PI_TYPE_F32 && y != PI_TYPE_F16 && y != PI_TYPE_BF16 && y != PI_TYPE_Q8_0 && y != PI_TYPE_Q4_0)
                continue;
            hw.matvec[y][t] = 14.0 * t, hw.rowdot[y][t] = 4.0 * t, hw.axpy[y][t] = 3.0 * t;
        }
    }
    static const int blocks[PI_HW_N_BLOCKS] = {4096, 8192, 16384, 32768, 65536, 131072},
                     qds[PI_HW_N_QD] = {1, 8, 32, 64, 128};
    for (int b = 0; b < PI_HW_N_BLOCKS; b++)
        for (int q = 0; q < PI_HW_N_QD; q++) {
            hw.block[b] = blocks[b], hw.qd[q] = qds[q];
            hw.read_iops[b][q] = 20000.0 * (q + 1), hw.read_lat_us[b][q] = 50.0 * (q + 1);
        }
    hw.seq_read_gbs = 2.0;
    hw.read_cpu_us = 2.5;
    hw.read_busy_k = 1.0; /* reads as fast with the cores computing */
    hw.io_huge_pages = true;
    snprintf(hw.io_backend, sizeof hw.io_backend, "pread");
    snprintf(hw.cpu, sizeof hw.cpu, "test");
    snprintf(hw.kernels_build, sizeof hw.kernels_build, "%s", pi_kernels_build_id());
    if (pi_hw_save(&hw, path) == PI_OK) return true;
    fprintf(stderr, "t_write_hw: %s\n", pi_last_error());
    return false;
}

#endif
