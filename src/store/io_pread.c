/*
 * io_pread.c — the pread backend: a pool of worker threads doing preadv,
 * for kernels (or builds) without io_uring.
 *
 * Invariants:
 *   - The driving thread pushes slot indices on `work`; a worker pops one,
 *     reads it whole (pi_io_read_fully) without the lock, stores the result
 *     in the slot and pushes it on `done`. Both rings hold queue_depth
 *     entries and at most queue_depth slots are out, so neither overflows.
 *   - A worker touches a slot only between its push on `work` and its push
 *     on `done` (both under mu); everything else in pi_io it reads is fixed
 *     at open.
 *   - close stops the workers after the read each is doing; reads still on
 *     `work` are dropped, reads in progress finish first.
 */
#include "store/io_internal.h"

#include "base/timer.h"

#include <pthread.h>
#include <string.h>

typedef struct pread_state {
    pi_io *io;
    pthread_t *workers; /* (n_workers started) */
    int n_workers;
    bool sync_ready;    /* mu and the conditions are initialised */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int_ring work, done; /* under mu */
    bool stop;           /* under mu */
} pread_state;

static void *worker_main(void *arg) {
    pread_state *p = arg;
    pi_io *io = p->io;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->work.n == 0) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        int si = pi_io_ring_pop(&p->work);
        pthread_mutex_unlock(&p->mu);
        io_slot *s = &io->slots[si];
        int64_t got = pi_io_read_fully(io, s->off, s->iov, s->iovcnt, s->len);
        pthread_mutex_lock(&p->mu);
        s->res = got;
        pi_io_ring_push(&p->done, si);
        pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pread_submit(pi_io *io, const int *si, int n) {
    pread_state *p = io->be;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++) pi_io_ring_push(&p->work, si[i]);
    if (n == 1) pthread_cond_signal(&p->cv_work);
    else pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    io->st.submit_calls++;
}

static int pread_reap(pi_io *io, uint64_t *tags, int max, bool block) {
    pread_state *p = io->be;
    int n = 0;
    pthread_mutex_lock(&p->mu);
    if (block && p->done.n == 0) {
        uint64_t t0 = pi_time_ns();
        while (p->done.n == 0) pthread_cond_wait(&p->cv_done, &p->mu);
        io->st.wait_ns += pi_time_ns() - t0;
    }
    while (n < max && p->done.n > 0) {
        int si = pi_io_ring_pop(&p->done);
        if (!pi_io_slot_finish(io, si, io->slots[si].res, &tags[n])) break;
        n++;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

static pi_status pread_open(pi_io *io, const pi_io_opts *o) {
    pread_state *p = io->be;
    p->io = io;
    if (!pi_io_ring_init(&p->work, io->qd) || !pi_io_ring_init(&p->done, io->qd) ||
        !(p->workers = calloc((size_t)o->n_workers, sizeof *p->workers)))
        return pi_error(PI_ERR_NOMEM, "%s: out of memory for the I/O queues", io->path);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->sync_ready = true;
    for (int i = 0; i < o->n_workers; i++) {
        int rc = pthread_create(&p->workers[i], NULL, worker_main, p);
        if (rc) return pi_error(PI_ERR_NOMEM, "%s: cannot start I/O thread %d: %s", io->path, i, strerror(rc));
        p->n_workers++;
    }
    return PI_OK;
}

static void pread_close(pi_io *io) {
    pread_state *p = io->be;
    if (p->sync_ready) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
        pthread_cond_destroy(&p->cv_work);
        pthread_cond_destroy(&p->cv_done);
        pthread_mutex_destroy(&p->mu);
    }
    free(p->workers);
    free(p->work.v);
    free(p->done.v);
}

const pi_io_ops pi_io_pread_ops = {
    .name = "pread",
    .state_size = sizeof(pread_state),
    .open = pread_open,
    .close = pread_close,
    .submit = pread_submit,
    .reap = pread_reap,
};
