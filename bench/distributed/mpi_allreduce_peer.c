/* The peer of bench_allreduce: the same f32 all-reduces through MPI_Allreduce ("mpi") and
 * through MPI_Iallreduce polled with MPI_Test ("mpi-nb", what the plugin does underneath), on
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
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long sizes[] = {4L << 10, 64L << 10, 1L << 20, 16L << 20, 64L << 20};
  for (int s = 0; s < 5; ++s) {
    const long bytes = sizes[s], n = bytes / 4;
    const int reps = bytes <= (64L << 10) ? 200 : bytes <= (1L << 20) ? 40 : 8;
    float* in = malloc(bytes);
    float* out = malloc(bytes);
    double* us = malloc(sizeof(double) * reps);
    for (long i = 0; i < n; ++i) in[i] = 1.0f + rank;
    for (int nb = 0; nb < 2; ++nb) {
      for (int r = 0; r < reps + 2; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (nb) {
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
      if (rank == 0) printf("%s %ld %.1f\n", nb ? "mpi-nb" : "mpi", bytes, us[reps / 2]);
    }
    free(in);
    free(out);
    free(us);
  }
  MPI_Finalize();
  return 0;
}
