/* The peer of bench_allreduce: the same f32 all-reduces through MPI_Allreduce ("mpi"), through
 * MPI_Iallreduce polled with MPI_Test ("mpi-nb", the plugin's path for large buffers) and, on 2
 * ranks up to 64 KiB, point-to-point messages polled with MPI_Testall ("mpi-p2p"), on
 * reused buffers, timed the same way (barrier, then one call; median after two warm-up rounds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* ravel-bench's peer protocol (docs/bench.md): `--workload all_reduce --size N --warmup W --reps R`
 * times MPI_Allreduce of N f32 elements (barrier, then one call; rank 0's time), checked once
 * against the sum computed locally, and prints one JSON line on rank 0. */
static int peer_mode(int argc, char** argv, int rank, int size) {
  const char* workload = "";
  long n = -1;
  int warmup = 1, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--workload")) workload = argv[i + 1];
    else if (!strcmp(argv[i], "--size")) n = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
  }
  if (strcmp(workload, "all_reduce") || n < 0) {
    if (rank == 0)
      printf("{\"workload\": \"%s\", \"size\": [%ld], \"unavailable\": \"runs all_reduce [n] only\"}\n", workload,
             n < 0 ? 0 : n);
    return 0;
  }
  float* in = malloc(sizeof(float) * (n ? n : 1));
  float* out = malloc(sizeof(float) * (n ? n : 1));
  double* ms = malloc(sizeof(double) * reps);
  for (long i = 0; i < n; ++i) in[i] = (float)((i + rank) % 7);
  MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (long i = 0; i < n; ++i) {
    long want = 0;
    for (int r = 0; r < size; ++r) want += (i + r) % 7;
    if (out[i] != (float)want) {
      fprintf(stderr, "bench_mpi_allreduce_peer: wrong sum at %ld\n", i);
      return 1;
    }
  }
  for (int r = 0; r < warmup + reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) * 1e3;
    if (r >= warmup) ms[r - warmup] = t;
  }
  qsort(ms, reps, sizeof(double), cmp);
  if (rank == 0)
    printf("{\"workload\": \"all_reduce\", \"size\": [%ld], \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
           "\"reps\": %d, \"checked\": true, \"threads\": \"%d ranks\"}\n", n, ms[reps / 2], ms[0], ms[reps - 1], reps, size);
  free(in);
  free(out);
  free(ms);
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc > 1 && !strcmp(argv[1], "--workload")) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = peer_mode(argc, argv, rank, size);
    MPI_Finalize();
    return rc;
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* mpi-p2p (2 ranks): each rank sends its buffer in pieces of CHUNK bytes (default 4000, under
   * btl/vader's eager limit: Note [Eager pieces] in plugins/mpi/mpi_small.cpp) and adds. */
  const long chunk = getenv("CHUNK") ? atol(getenv("CHUNK")) : 4000;
  const long sizes[] = {4L << 10, 16L << 10, 64L << 10, 1L << 20, 16L << 20, 64L << 20};
  const char* max_env = getenv("RAVEL_BENCH_MAX_BYTES"); /* stop after this size */
  const long max_bytes = max_env && *max_env ? atol(max_env) : (64L << 20);
  for (int s = 0; s < 6 && sizes[s] <= max_bytes; ++s) {
    const long bytes = sizes[s], n = bytes / 4;
    const int reps = bytes <= (64L << 10) ? 200 : bytes <= (1L << 20) ? 40 : 8;
    float* in = malloc(bytes);
    float* out = malloc(bytes);
    double* us = malloc(sizeof(double) * reps);
    for (long i = 0; i < n; ++i) in[i] = 1.0f + rank;
    float* peer = malloc(bytes);
    for (int nb = 0; nb < 3; ++nb) {
      if (nb == 2 && (bytes > (64L << 10) || size != 2)) break;
      for (int r = 0; r < reps + 2; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (nb == 2) { /* 2 ranks: the point-to-point exchange of the plugin's small path */
          MPI_Request q[2 * 64];
          int done = 0, other = 1 - rank, k = 0;
          for (long at = 0; at < bytes; at += chunk)
            MPI_Irecv((char*)peer + at, (int)(bytes - at < chunk ? bytes - at : chunk), MPI_BYTE, other, 7, MPI_COMM_WORLD, &q[k++]);
          for (long at = 0; at < bytes; at += chunk)
            MPI_Isend((char*)in + at, (int)(bytes - at < chunk ? bytes - at : chunk), MPI_BYTE, other, 7, MPI_COMM_WORLD, &q[k++]);
          while (!done) MPI_Testall(k, q, &done, MPI_STATUSES_IGNORE);
          const float* a = rank == 0 ? in : peer;
          const float* b = rank == 0 ? peer : in;
          for (long i = 0; i < n; ++i) out[i] = a[i] + b[i];
        } else if (nb) {
          MPI_Request q;
          int done = 0;
          MPI_Iallreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
          while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
        } else {
          MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        double t = (MPI_Wtime() - t0) * 1e6;
        if (r >= 2) us[r - 2] = t;
      }
      qsort(us, reps, sizeof(double), cmp);
      if (rank == 0) printf("%s %ld %.2f\n", nb == 2 ? "mpi-p2p" : nb ? "mpi-nb" : "mpi", bytes, us[reps / 2]);
    }
    free(peer);
    free(in);
    free(out);
    free(us);
  }
  MPI_Finalize();
  return 0;
}
