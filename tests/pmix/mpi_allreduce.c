/* An Open MPI program for ddlrun's PMIx server: MPI_Init, an MPI_Allreduce of every rank's
 * number, MPI_Finalize. Each rank checks the sum (0 + 1 + ... + size-1) and that MPI's rank
 * and size are what ddlrun planned ($DDL_RANK, $DDL_SIZE); exits 1 when not. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* want_rank = getenv("DDL_RANK");
  const char* want_size = getenv("DDL_SIZE");
  if (want_rank == NULL || want_size == NULL || atoi(want_rank) != rank ||
      atoi(want_size) != size) {
    fprintf(stderr, "mpi_allreduce: MPI says rank %d of %d; ddlrun planned rank %s of %s\n", rank,
            size, want_rank ? want_rank : "(unset)", want_size ? want_size : "(unset)");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  long mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const long want = (long)size * (size - 1) / 2;
  if (sum != want) {
    fprintf(stderr, "mpi_allreduce: rank %d got sum %ld, not %ld\n", rank, sum, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  printf("mpi_allreduce: rank %d of %d on %s: sum %ld ok\n", rank, size, host, sum);
  MPI_Finalize();
  return 0;
}
