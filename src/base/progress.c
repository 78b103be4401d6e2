/* Training progress: the live terminal line, CSV rows and the metrics
 * file; see progress.h. */
#include "base/progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "base/stream.h"

/* Seconds between two drawings of the live line. */
#define REDRAW_SECONDS 0.25

const char *const st_progress_format_names[] = {"text", "live", "csv", NULL};

static const char csv_header[] =
    "phase,iteration,epoch,wall_s,loss,lr,images_per_s,test_accuracy,test_loss,"
    "data_ms,compute_ms,barrier_ms,aggregation_ms,update_ms,communication_ms,precision\n";

struct st_progress {
    pthread_mutex_t lock;
    st_progress_format format;
    FILE *out;               /* the terminal (live) or the CSV stream (csv) */
    int dumb;                /* TERM=dumb or unset: clear with spaces, no escape codes */
    int shown;               /* columns of the live line on screen; 0: none */
    int began;               /* st_progress_begin was called */
    long first, iterations, per_epoch;
    double begin;            /* when training began (monotonic seconds) */
    /* the live line: figures since the last drawing */
    double last_draw, last_step;
    long last_done;
    double acc_loss, acc_seconds;
    long acc_images;
    /* the time left: training time (test phases excluded) per iteration */
    double train_seconds;
    long train_iters;
    /* --metrics: FILE.partial until it is closed, or written in place (fileio.h) */
    st_output metrics;
    char precision[16];      /* every row's last column */
};

st_status st_progress_create(st_progress **out, const st_progress_opts *o, st_error *err)
{
    *out = NULL;
    st_progress *p = st_calloc(1, sizeof *p, "progress", err);
    if (!p)
        return ST_ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->format = o->format;
    p->out = o->out;
    snprintf(p->precision, sizeof p->precision, "%s", o->precision ? o->precision : "fp32");
    const char *term = getenv("TERM");
    p->dumb = !term || !*term || strcmp(term, "dumb") == 0;
    st_status st = o->metrics ? st_output_open(&p->metrics, "--metrics", o->metrics, err)
                              : ST_OK;
    if (st != ST_OK) {
        st_progress_close(p, NULL);
        return st;
    }
    *out = p;
    return ST_OK;
}

const char *st_progress_partial(const st_progress *p)
{
    return p && p->metrics.f ? p->metrics.partial : NULL;
}

int st_progress_plain(const st_progress *p)
{
    return !p || p->format == ST_PROGRESS_TEXT;
}

/* Erase the live line (the lock held). */
static void clear_line(st_progress *p)
{
    int shown = p->shown;
    p->shown = 0;
    if (!shown || !st_stream_ok(p->out))
        return;
    if (p->dumb)
        fprintf(p->out, "\r%*s\r", shown, "");
    else
        fputs("\r\033[K", p->out);
    st_stream_flush(p->out);
}

void st_progress_hold(st_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    if (p->shown) {
        clear_line(p);
        p->last_draw = 0.0; /* drawn again at the next step */
    }
}

void st_progress_release(st_progress *p)
{
    if (p)
        pthread_mutex_unlock(&p->lock);
}

static int terminal_columns(FILE *f)
{
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *columns = getenv("COLUMNS");
    int c = columns ? atoi(columns) : 0;
    return c > 0 ? c : 80;
}

/* m:ss, or h:mm:ss from an hour on */
static void format_duration(char *buf, size_t size, double seconds)
{
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

/* Draw the live line (the lock held); the last one stays on its row. */
static void draw(st_progress *p, long done, double loss, double images_per_s, double now)
{
    int last = done >= p->iterations;
    char duration[24], when[32], line[256];
    if (!st_stream_ok(p->out))
        return;
    if (last) {
        format_duration(duration, sizeof duration, now - p->begin);
        snprintf(when, sizeof when, "in %s", duration);
    } else if (p->train_iters > 0) {
        double left = (double)(p->iterations - done) * p->train_seconds / (double)p->train_iters;
        format_duration(duration, sizeof duration, left);
        snprintf(when, sizeof when, "ETA %s", duration);
    } else {
        snprintf(when, sizeof when, "ETA -:--");
    }
    int n = snprintf(line, sizeof line, "iter %ld/%ld  epoch %.2f  loss %.4f  %.0f img/s  %s",
                     done, p->iterations, (double)done / (double)p->per_epoch, loss,
                     images_per_s, when);
    int width = terminal_columns(p->out) - 1; /* never wrap: \r returns to this row only */
    if (n > width)
        n = width > 0 ? width : 0;
    if (n < 0)
        n = 0;
    fputc('\r', p->out);
    fwrite(line, 1, (size_t)n, p->out);
    if (p->dumb && p->shown > n)
        fprintf(p->out, "%*s", p->shown - n, "");
    else if (!p->dumb)
        fputs("\033[K", p->out);
    if (last) {
        fputc('\n', p->out);
        p->shown = 0;
    } else {
        p->shown = n > 0 ? n : 1;
    }
    st_stream_flush(p->out);
}

/* A CSV row (or the header) for both destinations. */
static void write_rows(st_progress *p, const char *row)
{
    if (p->format == ST_PROGRESS_CSV && st_stream_ok(p->out)) {
        fputs(row, p->out);
        st_stream_flush(p->out);
    }
    if (p->metrics.f) {
        fputs(row, p->metrics.f);
        fflush(p->metrics.f);
    }
}

void st_progress_begin(st_progress *p, long first, long iterations, long per_epoch)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->began = 1;
    p->first = p->last_done = first;
    p->iterations = iterations;
    p->per_epoch = per_epoch > 0 ? per_epoch : 1;
    p->begin = p->last_step = st_now();
    write_rows(p, csv_header);
    pthread_mutex_unlock(&p->lock);
}

void st_progress_step(st_progress *p, long done, double loss, long images)
{
    if (!p || p->format != ST_PROGRESS_LIVE)
        return;
    pthread_mutex_lock(&p->lock);
    double now = st_now(), interval = now - p->last_step;
    p->train_seconds += interval;
    p->train_iters += done - p->last_done;
    p->acc_seconds += interval;
    p->acc_loss += loss;
    p->acc_images += images;
    p->last_step = now;
    p->last_done = done;
    if (done >= p->iterations || now - p->last_draw >= REDRAW_SECONDS) {
        draw(p, done, p->acc_images ? p->acc_loss / (double)p->acc_images : 0.0,
             p->acc_seconds > 0 ? (double)p->acc_images / p->acc_seconds : 0.0, now);
        p->last_draw = now;
        p->acc_loss = p->acc_seconds = 0.0;
        p->acc_images = 0;
    }
    pthread_mutex_unlock(&p->lock);
}

void st_progress_train(st_progress *p, const st_progress_row *r)
{
    if (!p || (p->format != ST_PROGRESS_CSV && !p->metrics.f))
        return;
    pthread_mutex_lock(&p->lock);
    char row[512], split[256] = ",,,,,";
    if (r->has_split)
        snprintf(split, sizeof split, "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f", r->data_ms, r->compute_ms,
                 r->barrier_ms, r->aggregation_ms, r->update_ms, r->communication_ms);
    snprintf(row, sizeof row, "train,%ld,%.4f,%.3f,%.6g,%.6g,%.1f,,,%s,%s\n", r->iteration,
             (double)r->iteration / (double)p->per_epoch, st_now() - p->begin, r->loss,
             r->lr, r->images_per_s, split, p->precision);
    write_rows(p, row);
    pthread_mutex_unlock(&p->lock);
}

void st_progress_test(st_progress *p, long iteration, double accuracy, double loss)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    double now = st_now();
    p->last_step = now; /* the test phase is not training time */
    char row[256];
    snprintf(row, sizeof row, "test,%ld,%.4f,%.3f,,,,%.6f,%.6g,,,,,,,%s\n", iteration,
             (double)iteration / (double)p->per_epoch, now - p->begin, accuracy, loss,
             p->precision);
    write_rows(p, row);
    pthread_mutex_unlock(&p->lock);
}

st_status st_progress_close(st_progress *p, st_error *err)
{
    if (!p)
        return ST_OK;
    st_status st = ST_OK;
    if (p->shown)
        clear_line(p);
    /* FILE.partial to FILE once training began, removed if it never did */
    st = st_output_close(&p->metrics, p->began, err);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return st;
}
