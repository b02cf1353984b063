/* What one thread waking another costs, the floor of any design in which a
 * blocking caller sleeps until another thread of the client hands it its
 * result (combining, an I/O thread): two threads pass a turn back and forth
 * through a mutex and a condition variable each, as combine.c wakes its
 * callers. Pin it to one CPU to price the hand-off where every client thread
 * shares a core (docs/benchmarks.md, issue 35).
 * Usage: taskset -c 1 build/rl_bench_handoff [hand-offs] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t woken[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static int turn;
static long rounds;

static void *pass_turns(void *arg)
{
    int me = (int)(long)arg;
    pthread_mutex_lock(&mutex);
    for (long i = 0; i < rounds; i++) {
        while (turn != me) pthread_cond_wait(&woken[me], &mutex);
        turn = !me;
        pthread_cond_signal(&woken[!me]);
    }
    pthread_mutex_unlock(&mutex);
    return NULL;
}

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long handoffs = argc > 1 ? atol(argv[1]) : 400000;
    rounds = handoffs / 2;
    pthread_t sides[2];
    double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < 2; i++) pthread_create(&sides[i], NULL, pass_turns, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(sides[i], NULL);
    double n = (double)(2 * rounds);
    printf("%.2f us wall, %.2f us CPU per hand-off\n", (seconds(CLOCK_MONOTONIC) - wall) / n * 1e6,
           (seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu) / n * 1e6);
    return 0;
}
