/* A process whose CPU time is split 3:1 between two functions with known names, for
 * the profile known-answer test: hoplab_burn_three runs three times as many identical
 * iterations as hoplab_burn_one, so it must take 75 % of the process's samples. It
 * runs for SECONDS of CPU time, not of wall time, so a busy machine delays it but does
 * not thin out its samples. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) void hoplab_burn_three(long n) {
    for (long i = 0; i < n; i++) sink += (unsigned long)i;
}

__attribute__((noinline)) void hoplab_burn_one(long n) {
    for (long i = 0; i < n; i++) sink += (unsigned long)i;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    struct timespec start, now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    do {
        hoplab_burn_three(3000000);
        hoplab_burn_one(1000000);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    return 0;
}
