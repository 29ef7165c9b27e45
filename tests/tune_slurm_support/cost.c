/* A kernel with a deterministic cost, for the tests of tdg tune's executors
 * (tests/cli/tune_slurm.rs). Each call spins until the process has spent
 * cost_ns of CPU time (CLOCK_PROCESS_CPUTIME_ID), and cost.spec times CPU
 * time, so the driver's figure is that cost plus the clock reads' share
 * however busy the machine is: the search follows the same path on every
 * run and executor. Costs are 100 us * 1.05^rank, rank being the configuration's
 * place in a fixed order (distance from P=1 Q=3 R=1, then a tie-break), so
 * every two configurations differ by 5 % or more and noise cannot swap
 * them.
 *
 * For the fault tests, every process that loads the kernel appends its
 * configuration to $TDG_TEST_TALLY; the run of the configuration named by
 * $TDG_TEST_KILL_ALWAYS kills its parent (the tdg task, as a node dying or
 * the OOM killer would), and so does the first run of $TDG_TEST_KILL_ONCE
 * (it leaves the file $TDG_TEST_KILL_MARK behind to know). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if !defined(P) || !defined(Q) || !defined(R)
#error "compile with -DP=.. -DQ=.. -DR=.. (1 to 3 each)"
#endif

#define SIDE 3 /* each macro runs 1..SIDE */

static int distance(int p, int q, int r) { return 3 * abs(p - 1) + 2 * abs(q - 3) + abs(r - 1); }

/* Place of (p, q, r) among all configurations ordered by distance, then
 * by the index p, q, r spell. */
static int rank_of(int p, int q, int r) {
  int d = distance(p, q, r), index = (p * 16 + q) * 16 + r, rank = 0;
  for (int a = 1; a <= SIDE; a++)
    for (int b = 1; b <= SIDE; b++)
      for (int c = 1; c <= SIDE; c++) {
        int e = distance(a, b, c), i = (a * 16 + b) * 16 + c;
        if (e < d || (e == d && i < index))
          rank++;
      }
  return rank;
}

static long long cost_ns;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int is(const char *wanted, const char *me) { return wanted && strcmp(wanted, me) == 0; }

static void kill_parent(void) {
  kill(getppid(), SIGKILL);
  _exit(1);
}

__attribute__((constructor)) static void start(void) {
  double c = 100000.0;
  for (int i = rank_of(P, Q, R); i > 0; i--)
    c *= 1.05;
  cost_ns = (long long)c;

  char me[64];
  snprintf(me, sizeof me, "P=%d Q=%d R=%d", P, Q, R);
  const char *tally = getenv("TDG_TEST_TALLY");
  if (tally && *tally) {
    char line[80];
    int n = snprintf(line, sizeof line, "%s\n", me);
    int fd = open(tally, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
      if (write(fd, line, (size_t)n) != n)
        perror(tally);
      close(fd);
    }
  }
  if (is(getenv("TDG_TEST_KILL_ALWAYS"), me))
    kill_parent();
  const char *mark = getenv("TDG_TEST_KILL_MARK");
  if (is(getenv("TDG_TEST_KILL_ONCE"), me) && mark) {
    int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      close(fd);
      kill_parent();
    }
  }
}

void spin_cost(double *X) {
  long long until = now_ns() + cost_ns;
  while (now_ns() < until)
    X[0] += 1.0;
}
