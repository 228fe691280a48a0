/* The peer of bench_allreduce: the same f32 all-reduces through MPI_Allreduce ("mpi"), through
 * MPI_Iallreduce polled with MPI_Test ("mpi-nb", the plugin's path for large buffers) and, on 2
 * ranks up to 64 KiB, point-to-point messages polled with MPI_Testall ("mpi-p2p"), on
 * reused buffers, timed the same way (barrier, then one call; median after two warm-up rounds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* mpi-p2p (2 ranks): each rank sends its buffer in pieces of CHUNK bytes (default 4000, under
   * btl/vader's eager limit: Note [Eager pieces] in plugins/mpi/mpi_small.cpp) and adds. */
  const long chunk = getenv("CHUNK") ? atol(getenv("CHUNK")) : 4000;
  const long sizes[] = {4L << 10, 16L << 10, 64L << 10, 1L << 20, 16L << 20, 64L << 20};
  for (int s = 0; s < 6; ++s) {
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
      if (rank == 0) printf("%s %ld %.1f\n", nb == 2 ? "mpi-p2p" : nb ? "mpi-nb" : "mpi", bytes, us[reps / 2]);
    }
    free(peer);
    free(in);
    free(out);
    free(us);
  }
  MPI_Finalize();
  return 0;
}
