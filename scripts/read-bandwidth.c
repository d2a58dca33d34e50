/*
 * How fast this machine's cores read memory: one core, then two at once,
 * each streaming its own buffer (the way a query's f32 embedding streams
 * the model's weights, which do not fit the cache). Diagnosis only.
 *
 *     cc -O3 -march=native -pthread scripts/read-bandwidth.c -o read-bandwidth
 *     ./read-bandwidth [MB per buffer, default 256] [repeats, default 5]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t *buffers[2];
static size_t words;
static volatile uint64_t sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Integer sums, so the compiler may vectorise and reorder them. */
static void *stream(void *arg) {
    const uint64_t *a = buffers[(uintptr_t)arg];
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= words; i += 4) {
        s0 += a[i];
        s1 += a[i + 1];
        s2 += a[i + 2];
        s3 += a[i + 3];
    }
    sink = s0 + s1 + s2 + s3;
    return NULL;
}

int main(int argc, char **argv) {
    long mb = argc > 1 ? atol(argv[1]) : 256;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    if (mb < 1 || repeats < 1) {
        fprintf(stderr, "usage: %s [MB per buffer] [repeats]\n", argv[0]);
        return 2;
    }
    words = (size_t)mb * 1024 * 1024 / sizeof(uint64_t);
    for (int k = 0; k < 2; k++) {
        buffers[k] = malloc(words * sizeof(uint64_t));
        if (!buffers[k]) {
            fprintf(stderr, "cannot allocate %ld MB\n", mb);
            return 1;
        }
        for (size_t i = 0; i < words; i++) buffers[k][i] = i;
    }
    for (int r = 0; r < repeats; r++) {
        double t = now();
        stream((void *)0);
        double one = now() - t;
        pthread_t a, b;
        t = now();
        pthread_create(&a, NULL, stream, (void *)0);
        pthread_create(&b, NULL, stream, (void *)1);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        double two = now() - t;
        printf("%ld MB per buffer: one core %.1f GB/s, two cores %.1f GB/s\n", mb,
               mb / 1024.0 / one, 2 * mb / 1024.0 / two);
    }
    return 0;
}
