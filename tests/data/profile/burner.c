/* A process whose CPU time is split 3:1 between two functions with known names, for
 * the profile known-answer test. It does not trust iteration counts (two identical
 * loops need not run at the same speed: alignment, store forwarding); it measures
 * the CPU time of each call and always runs whichever function is behind its share.
 * Calls last about 50 ms, many sampling periods each: with calls of a few tens of
 * microseconds, perf's samples on this VM fell twice as often in the function just
 * switched to (measured: 2:1 for a true 3:1). It runs for SECONDS of CPU time in
 * all, so a busy machine delays it but does not thin out its samples. RATIO (default 3)
 * changes the split to RATIO:1, for profiles that differ by a known amount.
 * usage: burner SECONDS [RATIO] */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline, aligned(64))) void hoplab_burn_three(long n) {
    unsigned long x = sink;
    for (long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

__attribute__((noinline, aligned(64))) void hoplab_burn_one(long n) {
    unsigned long x = sink;
    for (long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    double ratio = argc > 2 ? atof(argv[2]) : 3.0;
    double in_three = 0, in_one = 0;
    long n = 30000;
    while (in_three + in_one < seconds) {
        double t = cpu_now(), dt;
        if (in_three < ratio * in_one) {
            hoplab_burn_three(n);
            dt = cpu_now() - t;
            in_three += dt;
        } else {
            hoplab_burn_one(n);
            dt = cpu_now() - t;
            in_one += dt;
        }
        if (dt > 0 && dt < 0.04) n = (long)(n * 0.05 / dt);
    }
    return 0;
}
