/* mempool_peer: DPDK's rte_mempool under the loop of DPDK's
 * mempool_perf_autotest, one case per run, so that compare_mempool can
 * interleave DPDK and rpmd case by case (dpdk-test itself runs every case
 * for 5 s in a fixed order, about an hour).
 *
 * Each lcore repeatedly takes n_keep objects in bulks of n_get_bulk with
 * rte_mempool_generic_get and returns them in bulks of n_put_bulk with
 * rte_mempool_generic_put, through its default per-lcore cache (cache=512)
 * or none (cache=0), for the given seconds. The pool is made as the
 * autotest makes it: lcores * (512 + 512) - 1 objects of 2048 bytes.
 * Prints the autotest's line: "mempool_autotest <case> rate_persec=<n>".
 *
 * usage: mempool_peer EAL-ARGS -- [--blocks K] --seconds S --case "cache=C cores=K
 *        n_get_bulk=G n_put_bulk=P n_keep=N constant_n=X"
 * Built by benches/compare.sh with pkg-config libdpdk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_mempool.h>
#include <rte_atomic.h>

#define MAX_KEEP 512
#define ELT_SIZE 2048

static unsigned cache_size, cores = 1, n_get = 1, n_put = 1, n_keep = 32, constant_n;
static double seconds = 5.0;
static uint64_t blocks = UINT64_MAX; /* --blocks K: stop after K*1024 rounds (instruction counting) */
static struct rte_mempool *mp;
static volatile int start_flag;
static uint64_t done[RTE_MAX_LCORE];

/* One round: take n_keep objects, then give them back. */
static inline int round_trip(struct rte_mempool_cache *cache, void **objs,
                             unsigned get, unsigned put)
{
    unsigned i;
    for (i = 0; i < n_keep; i += get)
        if (rte_mempool_generic_get(mp, &objs[i], get, cache) < 0)
            return -1;
    for (i = 0; i < n_keep; i += put)
        rte_mempool_generic_put(mp, &objs[i], put, cache);
    return 0;
}

static int lcore_main(void *arg)
{
    (void)arg;
    void *objs[MAX_KEEP];
    unsigned lcore = rte_lcore_id();
    struct rte_mempool_cache *cache = rte_mempool_default_cache(mp, lcore);
    uint64_t hz = rte_get_timer_hz(), n = 0;
    while (!start_flag)
        rte_pause();
    uint64_t start = rte_get_timer_cycles(), limit = (uint64_t)(seconds * hz);
    for (uint64_t b = 0; b < blocks && rte_get_timer_cycles() - start < limit; b++) {
        for (int k = 0; k < 1024; k++) {
            int r;
            /* constant_n=1: bulk sizes known at compile time, as the
             * autotest's specialised loops. */
            if (constant_n && n_get == 1 && n_put == 1)
                r = round_trip(cache, objs, 1, 1);
            else if (constant_n && n_get == 4 && n_put == 4)
                r = round_trip(cache, objs, 4, 4);
            else if (constant_n && n_get == 32 && n_put == 32)
                r = round_trip(cache, objs, 32, 32);
            else
                r = round_trip(cache, objs, n_get, n_put);
            if (r < 0) {
                fprintf(stderr, "mempool_peer: get failed\n");
                return -1;
            }
            n += n_keep;
        }
    }
    done[lcore] = (uint64_t)((double)n / ((double)(rte_get_timer_cycles() - start) / hz));
    return 0;
}

static int parse_case(const char *s)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) {
        unsigned v;
        char key[32];
        if (sscanf(t, "%31[^=]=%u", key, &v) != 2)
            return -1;
        if (!strcmp(key, "cache")) cache_size = v;
        else if (!strcmp(key, "cores")) cores = v;
        else if (!strcmp(key, "n_get_bulk")) n_get = v;
        else if (!strcmp(key, "n_put_bulk")) n_put = v;
        else if (!strcmp(key, "n_keep")) n_keep = v;
        else if (!strcmp(key, "constant_n")) constant_n = v;
        else return -1;
    }
    if (n_keep > MAX_KEEP || n_get == 0 || n_put == 0 || n_keep % n_get || n_keep % n_put)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    int used = rte_eal_init(argc, argv);
    if (used < 0) {
        fprintf(stderr, "mempool_peer: EAL init failed\n");
        return 1;
    }
    argc -= used;
    argv += used;
    const char *c = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--case")) c = argv[i + 1];
        else if (!strcmp(argv[i], "--blocks")) blocks = strtoull(argv[i + 1], NULL, 10);
    }
    if (!c || parse_case(c) < 0 || seconds <= 0) {
        fprintf(stderr, "mempool_peer: usage: EAL-ARGS -- --seconds S --case \"cache=C cores=K n_get_bulk=G n_put_bulk=P n_keep=N constant_n=X\"\n");
        return 2;
    }
    if (cores > rte_lcore_count()) {
        fprintf(stderr, "mempool_peer: %u cores asked, EAL has %u lcores\n", cores, rte_lcore_count());
        return 2;
    }
    mp = rte_mempool_create("mempool_peer", rte_lcore_count() * (MAX_KEEP + RTE_MEMPOOL_CACHE_MAX_SIZE) - 1,
                            ELT_SIZE, cache_size, 0, NULL, NULL, NULL, NULL, SOCKET_ID_ANY, 0);
    if (!mp) {
        fprintf(stderr, "mempool_peer: cannot create the mempool\n");
        return 1;
    }
    unsigned started = 1, lcore;
    RTE_LCORE_FOREACH_WORKER(lcore) {
        if (started == cores)
            break;
        rte_eal_remote_launch(lcore_main, NULL, lcore);
        started++;
    }
    start_flag = 1;
    rte_smp_mb();
    int ret = lcore_main(NULL);
    rte_eal_mp_wait_lcore();
    uint64_t total = 0;
    for (unsigned i = 0; i < RTE_MAX_LCORE; i++)
        total += done[i];
    printf("mempool_autotest cache=%u cores=%u n_get_bulk=%u n_put_bulk=%u n_keep=%u constant_n=%u rate_persec=%lu\n",
           cache_size, cores, n_get, n_put, n_keep, constant_n, (unsigned long)total);
    rte_mempool_free(mp);
    rte_eal_cleanup();
    return ret < 0;
}
