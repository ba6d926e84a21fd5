/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-conn-harness.c - drives one iscsi_conn (drivers/iscsi-conn.h)
 * against a real server for tests/integration/iscsi-conn.sh.
 *
 *   iscsi-conn-harness [OPTIONS] CASE
 *     verify   many commands in flight, iovecs of several entries: write a
 *              pattern, FUA write, SYNC, read back byte for byte; UNMAP
 *              (--expect-unmap yes|no), WRITE_ZEROES, -EINVAL checks, the
 *              queue-depth bound
 *     down     the portal does not listen: DOWN and -EIO within 2 s, and
 *              -EIO at once (never inside iscsi_conn_submit) while DOWN
 *     stream   writes to distinct slots for --seconds, with the server
 *              killed and restarted meanwhile by the script: no command
 *              fails, every slot reads back as last written, and the
 *              connection reconnected and reissued commands
 *     stall    handshake files in --dir: ready -> (script SIGSTOPs the
 *              server, touches stopped) -> commands end with -ETIMEDOUT
 *              near --timeout-ms -> timedout -> DOWN once the login
 *              attempts are spent -> (script SIGCONTs, touches
 *              continued) -> UP again (a revive) and a verified
 *              write/read
 *     login    --expect up: UP and a verified write/read; --expect down:
 *              DOWN with an error message, commands fail with -EIO
 *     pr       two connections to one LUN, --initiator and --initiator2
 *              (hosts "host-a" and "host-b"): both register, A reserves
 *              Write Exclusive - Registrants Only, both write; B
 *              preempts-and-aborts A's key; A's writes then fail with
 *              -EACCES and never land (B reads its own data back), B's
 *              succeed; READ KEYS shows only B, READ RESERVATION B's
 *              WERO; a repeated preempt is "already done"; A registered
 *              again (re-admitted) writes again.  Writes what region 1
 *              must hold to --dir/pr-region1.bin for the script to
 *              compare with the LUN's backing file.
 *     pr-keys  READ KEYS and READ RESERVATION: prints "keys: K..." and
 *              "reservation: none|KEY type T" (for stripe-fence.sh)
 *     pr-preempt  registers the key of host --pr-host, then preempts the
 *              key of host --pr-victim (a fenced takeover by hand)
 *     register as host --host-id (its key) on one session: register,
 *              reserve WERO when the LUN has no reservation, write region
 *              0; then log out (the registration stays on the LUN)
 *     hold     as register, then keep the session: touch --dir/ready,
 *              wait (up to --seconds) for --dir/go, write region 1:
 *              --expect fenced wants RESERVATION CONFLICT (-EACCES: this
 *              host was fenced meanwhile), else the write must succeed
 *     keys     READ KEYS and READ RESERVATION: prints "generation G",
 *              "key 0x..." per registration, "reservation 0xKEY TYPE"
 *              or "reservation none"
 *     keyof    prints the key of --host-id (no connection)
 *
 * Prints what it checks and the connection's JSON report; exits 0 when
 * every check passed, 1 otherwise, 2 for a bad command line.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/stripe/iscsi/iscsi-conn.h"
#include "drivers/stripe/iscsi/iscsi-pr.h"
#include "common/json.h"
#include "common/log.h"
#include "common/loop.h"

#define MAX_CMDS     512
#define MAX_IOV	     8
#define REGION_BYTES (8u << 20)
#define SLOT_BYTES   (64u << 10)
#define NS_PER_MS    1000000ull

struct hcmd {
	struct iscsi_cmd cmd;
	struct iovec iov[MAX_IOV];
	bool busy;
	int err;
	uint64_t done_ns;
	uint32_t slot;
	uint32_t gen;
};

static struct {
	struct iscsi_conn_cfg cfg;
	const char *dir;
	const char *initiator2;
	const char *pr_host, *pr_victim; /* pr-preempt */
	const char *host_id;
	const char *expect;
	const char *expect_unmap;
	unsigned int seconds;
} opt;

static struct td_loop *loop;
static struct iscsi_conn *conn;
static struct hcmd cmds[MAX_CMDS];
static unsigned int outstanding;
static bool in_submit;
static int failures;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static void check(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", ok ? "ok" : "FAILED");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		failures++;
}

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static uint64_t now_ms(void)
{
	return td_now_ns() / NS_PER_MS;
}

/* --- commands -------------------------------------------------------------- */

static void hcmd_done(struct iscsi_cmd *cmd, int err)
{
	struct hcmd *h = (struct hcmd *)cmd;

	if (in_submit) {
		check(false, "a completion ran inside iscsi_conn_submit");
	}
	if (!h->busy)
		check(false, "a command completed twice");
	h->busy = false;
	h->err = err;
	h->done_ns = td_now_ns();
	outstanding--;
}

static struct hcmd *hcmd_get(void)
{
	for (int i = 0; i < MAX_CMDS; i++)
		if (!cmds[i].busy && !cmds[i].cmd.done) {
			memset(&cmds[i], 0, sizeof(cmds[i]));
			return &cmds[i];
		}
	return NULL;
}

static void hcmd_put(struct hcmd *h)
{
	h->cmd.done = NULL;
}

/* Split [buf, buf+bytes) into up to MAX_IOV entries at random offsets. */
static int split_iov(struct iovec *iov, uint8_t *buf, size_t bytes)
{
	int n = 1 + (int)rnd(MAX_IOV);
	size_t left = bytes;
	int i;

	for (i = 0; i < n - 1 && left > 1; i++) {
		size_t len = 1 + rnd((uint32_t)(left - 1));

		iov[i].iov_base = buf;
		iov[i].iov_len = len;
		buf += len;
		left -= len;
	}
	iov[i].iov_base = buf;
	iov[i].iov_len = left;
	return i + 1;
}

static void submit(struct hcmd *h, enum iscsi_cmd_op op, uint64_t lba,
		   uint32_t nr, uint8_t *buf, bool fua)
{
	uint32_t bs = iscsi_conn_block_size(conn);

	h->cmd.op = op;
	h->cmd.lba = lba;
	h->cmd.nr_blocks = nr;
	h->cmd.fua = fua;
	h->cmd.done = hcmd_done;
	if (buf)
		h->cmd.iovcnt = split_iov(h->iov, buf, (size_t)nr * bs);
	h->cmd.iov = buf ? h->iov : NULL;
	h->busy = true;
	outstanding++;
	in_submit = true;
	iscsi_conn_submit(conn, &h->cmd);
	in_submit = false;
}

typedef bool (*pred_fn)(void);

/* Run the loop until pred() or timeout_ms; returns pred(). */
static bool run_until(pred_fn pred, uint64_t timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;

	while (!pred() && now_ms() < end)
		td_loop_run_once(loop, 20);
	return pred();
}

static bool all_done(void)
{
	return outstanding == 0;
}

static bool is_up(void)
{
	return iscsi_conn_state(conn) == ISCSI_CONN_UP;
}

static bool is_down(void)
{
	return iscsi_conn_state(conn) == ISCSI_CONN_DOWN;
}

static bool settled(void)
{
	return is_up() || is_down();
}

/* One command alone; returns its errno. */
static int one(enum iscsi_cmd_op op, uint64_t lba, uint32_t nr, uint8_t *buf,
	       bool fua)
{
	struct hcmd *h = hcmd_get();
	int err;

	submit(h, op, lba, nr, buf, fua);
	if (!run_until(all_done, 60000))
		return -EINPROGRESS;
	err = h->err;
	hcmd_put(h);
	return err;
}

/* Wait for every command, keep the first error, free them all. */
static int collect(int err)
{
	if (!run_until(all_done, 60000))
		return -EINPROGRESS;
	for (int i = 0; i < MAX_CMDS; i++) {
		if (cmds[i].cmd.done && cmds[i].err && !err)
			err = cmds[i].err;
		hcmd_put(&cmds[i]);
	}
	return err;
}

/* bytes at lba through commands of 1..max_blocks blocks, all in flight. */
static int batch(enum iscsi_cmd_op op, uint64_t lba, uint8_t *buf,
		 uint32_t bytes, uint32_t max_blocks)
{
	uint32_t bs = iscsi_conn_block_size(conn);
	uint32_t done = 0;
	int err = 0;

	while (done < bytes) {
		uint32_t nr = 1 + rnd(max_blocks);
		struct hcmd *h = hcmd_get();

		if (!h) {
			err = collect(err);
			continue;
		}
		if (nr > (bytes - done) / bs)
			nr = (bytes - done) / bs;
		submit(h, op, lba + done / bs, nr, buf + done, false);
		done += nr * bs;
	}
	return collect(err);
}

static void fill(uint8_t *buf, size_t bytes, uint32_t seed)
{
	for (size_t i = 0; i < bytes; i += 4) {
		uint32_t v = seed * 2654435761u ^ (uint32_t)i;

		memcpy(buf + i, &v, 4);
	}
}

static void report(void)
{
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	iscsi_conn_report(conn, &j, NULL);
	td_json_finish(&j);
	fputs(td_strbuf_str(&sb), stdout);
	td_strbuf_free(&sb);
}

/* A write then a read of bytes at lba, compared. */
static void write_read(uint64_t lba, uint32_t bytes, uint32_t seed,
		       const char *what)
{
	uint8_t *w = malloc(bytes), *r = malloc(bytes);
	int we, re;

	fill(w, bytes, seed);
	memset(r, 0, bytes);
	we = batch(ISCSI_CMD_WRITE, lba, w, bytes, 16);
	re = batch(ISCSI_CMD_READ, lba, r, bytes, 16);
	check(!we && !re && !memcmp(w, r, bytes),
	      "%s: write %d, read %d, data %s", what, we, re,
	      memcmp(w, r, bytes) ? "differs" : "equal");
	free(w);
	free(r);
}

/* --- cases ---------------------------------------------------------------- */

static void case_verify(void)
{
	uint32_t bs = iscsi_conn_block_size(conn);
	uint8_t *expect = malloc(REGION_BYTES), *got = malloc(REGION_BYTES);
	struct iscsi_conn_stats st;
	int err;

	fill(expect, REGION_BYTES, 1);
	err = batch(ISCSI_CMD_WRITE, 0, expect, REGION_BYTES, 16);
	iscsi_conn_get_stats(conn, &st);
	check(!err, "write 8 MiB in commands of 1..16 blocks: %d", err);
	check(st.max_in_flight <= opt.cfg.queue_depth &&
		      st.max_in_flight == opt.cfg.queue_depth,
	      "max_in_flight %u == queue depth %u", st.max_in_flight,
	      opt.cfg.queue_depth);

	fill(expect + 5 * bs, bs, 77);
	err = one(ISCSI_CMD_WRITE, 5, 1, expect + 5 * bs, true);
	check(!err, "FUA write: %d", err);
	err = one(ISCSI_CMD_SYNC, 0, 0, NULL, false);
	check(!err, "SYNCHRONIZE CACHE(16): %d", err);

	memset(got, 0xee, REGION_BYTES);
	err = batch(ISCSI_CMD_READ, 0, got, REGION_BYTES, 32);
	check(!err && !memcmp(expect, got, REGION_BYTES),
	      "read back 8 MiB in commands of 1..32 blocks: %d, data %s", err,
	      memcmp(expect, got, REGION_BYTES) ? "DIFFERS" : "equal");

	err = one(ISCSI_CMD_UNMAP, 64, 16, NULL, false);
	if (!strcmp(opt.expect_unmap, "yes")) {
		check(iscsi_conn_can_unmap(conn) && !err,
		      "UNMAP supported and done: can_unmap %d, %d",
		      iscsi_conn_can_unmap(conn), err);
		memset(expect + 64 * bs, 0, 16 * bs);
	} else {
		check(!iscsi_conn_can_unmap(conn) && err == -EOPNOTSUPP,
		      "UNMAP not supported: can_unmap %d, %d (want %d)",
		      iscsi_conn_can_unmap(conn), err, -EOPNOTSUPP);
	}
	err = one(ISCSI_CMD_WRITE_ZEROES, 200, 40, NULL, true);
	check(!err, "WRITE_ZEROES of 40 blocks with FUA: %d", err);
	memset(expect + 200 * bs, 0, 40 * bs);
	err = batch(ISCSI_CMD_READ, 0, got, 256 * bs, 32);
	check(!err && !memcmp(expect, got, 256 * bs),
	      "zeroed blocks read back as zeroes (and unmapped ones): %s",
	      memcmp(expect, got, 256 * bs) ? "DIFFERS" : "equal");

	err = one(ISCSI_CMD_READ, iscsi_conn_nr_blocks(conn) - 1, 2, got,
		  false);
	check(err == -EINVAL, "READ beyond the LUN: %d (want %d)", err,
	      -EINVAL);
	{
		struct hcmd *h = hcmd_get();

		h->iov[0].iov_base = got;
		h->iov[0].iov_len = bs + 1; /* not 2 blocks */
		h->cmd.op = ISCSI_CMD_READ;
		h->cmd.nr_blocks = 2;
		h->cmd.iov = h->iov;
		h->cmd.iovcnt = 1;
		h->cmd.done = hcmd_done;
		h->busy = true;
		outstanding++;
		iscsi_conn_submit(conn, &h->cmd);
		run_until(all_done, 5000);
		check(h->err == -EINVAL, "iovecs not adding up: %d", h->err);
		hcmd_put(h);
	}
	free(expect);
	free(got);
}

static void case_down(void)
{
	uint64_t t0 = now_ms(), t1;
	uint8_t buf[4096];
	struct hcmd *h = hcmd_get();

	/* Queued while CONNECTING: fails once the attempts are spent. */
	h->cmd.op = ISCSI_CMD_READ;
	h->cmd.lba = 0;
	h->cmd.nr_blocks = 1;
	h->iov[0].iov_base = buf;
	h->iov[0].iov_len = sizeof(buf);
	h->cmd.iov = h->iov;
	h->cmd.iovcnt = 1;
	h->cmd.done = hcmd_done;
	h->busy = true;
	outstanding++;
	in_submit = true;
	iscsi_conn_submit(conn, &h->cmd);
	in_submit = false;
	run_until(all_done, 5000);
	t1 = now_ms();
	check(!h->busy && h->err == -EIO && t1 - t0 < 2000,
	      "queued command failed with %d after %llu ms (want %d, < 2 s)",
	      h->err, (unsigned long long)(t1 - t0), -EIO);
	check(is_down(), "state %s, error: %s",
	      iscsi_conn_state_name(iscsi_conn_state(conn)),
	      iscsi_conn_error(conn));
	check(iscsi_conn_error(conn)[0] != '\0', "an error message is set");
	t0 = now_ms();
	h->busy = true;
	outstanding++;
	in_submit = true;
	iscsi_conn_submit(conn, &h->cmd);
	in_submit = false;
	check(h->busy, "not completed inside iscsi_conn_submit");
	run_until(all_done, 5000);
	check(h->err == -EIO && now_ms() - t0 < 100,
	      "while DOWN: %d after %llu ms", h->err,
	      (unsigned long long)(now_ms() - t0));
	hcmd_put(h);
}

/* stream: slots of SLOT_BYTES, one write at a time per slot. */
static uint8_t *stream_model, *stream_buf;
static bool slot_busy[REGION_BYTES / SLOT_BYTES];
static uint32_t slot_gen[REGION_BYTES / SLOT_BYTES];

/* Account the finished writes of the stream, then keep 32 in flight. */
static void stream_harvest(void)
{
	for (int i = 0; i < MAX_CMDS; i++) {
		struct hcmd *h = &cmds[i];
		size_t off = (size_t)h->slot * SLOT_BYTES;

		if (h->busy || !h->cmd.done)
			continue;
		if (h->err)
			check(false, "stream write to slot %u: %d", h->slot,
			      h->err);
		else
			memcpy(stream_model + off, stream_buf + off,
			       SLOT_BYTES);
		slot_busy[h->slot] = false;
		hcmd_put(h);
	}
}

static void stream_refill(void)
{
	uint32_t bs = iscsi_conn_block_size(conn);
	struct hcmd *h;

	stream_harvest();
	while (outstanding < 32 && (h = hcmd_get())) {
		uint32_t s = rnd(REGION_BYTES / SLOT_BYTES);
		uint8_t *buf = stream_buf + (size_t)s * SLOT_BYTES;

		if (slot_busy[s])
			continue;
		h->slot = s;
		h->gen = ++slot_gen[s];
		slot_busy[s] = true;
		fill(buf, SLOT_BYTES, s * 100000 + h->gen);
		submit(h, ISCSI_CMD_WRITE, (uint64_t)s * SLOT_BYTES / bs,
		       SLOT_BYTES / bs, buf, false);
	}
}

static void case_stream(void)
{
	uint64_t end = now_ms() + opt.seconds * 1000ull;
	uint8_t *got = malloc(REGION_BYTES);
	struct iscsi_conn_stats st;
	int err;

	stream_model = malloc(REGION_BYTES);
	stream_buf = malloc(REGION_BYTES);
	fill(stream_model, REGION_BYTES, 5);
	memcpy(stream_buf, stream_model, REGION_BYTES);
	err = batch(ISCSI_CMD_WRITE, 0, stream_model, REGION_BYTES, 16);
	check(!err, "initial write: %d", err);
	printf("streaming for %u s\n", opt.seconds);
	fflush(stdout);
	while (now_ms() < end) {
		stream_refill();
		td_loop_run_once(loop, 20);
	}
	run_until(all_done, 60000);
	stream_harvest();
	err = batch(ISCSI_CMD_READ, 0, got, REGION_BYTES, 32);
	check(!err && !memcmp(got, stream_model, REGION_BYTES),
	      "every slot reads back as last written: %d, data %s", err,
	      memcmp(got, stream_model, REGION_BYTES) ? "DIFFERS" : "equal");
	iscsi_conn_get_stats(conn, &st);
	check(st.reconnects >= 1 && st.reissued >= 1,
	      "reconnects %llu, reissued %llu, errors %llu",
	      (unsigned long long)st.reconnects,
	      (unsigned long long)st.reissued, (unsigned long long)st.errors);
	check(st.errors == 0, "no command failed");
	free(got);
	free(stream_model);
	free(stream_buf);
}

static char flag_path[512];
static bool seen_down;

static bool flag_exists(void)
{
	seen_down = seen_down || is_down();
	return access(flag_path, F_OK) == 0;
}

static bool wait_flag(const char *name, uint64_t timeout_ms)
{
	snprintf(flag_path, sizeof(flag_path), "%s/%s", opt.dir, name);
	return run_until(flag_exists, timeout_ms);
}

static void touch(const char *name)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", opt.dir, name);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

static void case_stall(void)
{
	uint32_t bs = iscsi_conn_block_size(conn);
	uint8_t *buf = malloc(1u << 20);
	uint64_t t0, lo = UINT64_MAX, hi = 0;
	struct iscsi_conn_stats st;
	int n = 16, timedout = 0;

	write_read(0, 1u << 20, 3, "before the stall");
	touch("ready");
	check(wait_flag("stopped", 20000), "the server was stopped");
	t0 = td_now_ns();
	/* Far from the region verified afterwards: a write the server takes
	 * from its socket after SIGCONT may still land here. */
	for (int i = 0; i < n; i++)
		submit(hcmd_get(), i % 2 ? ISCSI_CMD_READ : ISCSI_CMD_WRITE,
		       4096 + (uint64_t)i * 16, 16, buf + (size_t)i * 16 * bs,
		       false);
	run_until(all_done, opt.cfg.cmd_timeout_ms + 10000ull);
	for (int i = 0; i < n; i++) {
		uint64_t ms = (cmds[i].done_ns - t0) / NS_PER_MS;

		timedout += cmds[i].err == -ETIMEDOUT;
		lo = ms < lo ? ms : lo;
		hi = ms > hi ? ms : hi;
		hcmd_put(&cmds[i]);
	}
	check(timedout == n && lo >= opt.cfg.cmd_timeout_ms &&
		      hi < opt.cfg.cmd_timeout_ms + 1000,
	      "%d of %d commands timed out, after %llu..%llu ms (timeout %u)",
	      timedout, n, (unsigned long long)lo, (unsigned long long)hi,
	      opt.cfg.cmd_timeout_ms);
	touch("timedout");
	check(wait_flag("continued", 30000), "the server was continued");
	check(seen_down, "DOWN while the server was stopped (%s)",
	      iscsi_conn_error(conn));
	t0 = now_ms();
	check(run_until(is_up, 20000), "UP again %llu ms after SIGCONT",
	      (unsigned long long)(now_ms() - t0));
	if (is_up())
		write_read(0, 1u << 20, 4, "after the stall");
	iscsi_conn_get_stats(conn, &st);
	check(st.timeouts >= (uint64_t)n, "stats: %llu timeouts",
	      (unsigned long long)st.timeouts);
	free(buf);
}

static void case_login(void)
{
	if (!strcmp(opt.expect, "up")) {
		check(is_up(), "logged in: %s",
		      iscsi_conn_state_name(iscsi_conn_state(conn)));
		if (is_up())
			write_read(0, 256u << 10, 9, "after login");
		return;
	}
	check(is_down(), "refused: %s, error: %s",
	      iscsi_conn_state_name(iscsi_conn_state(conn)),
	      iscsi_conn_error(conn));
	check(strstr(iscsi_conn_error(conn), "uthentication") != NULL,
	      "the error names the authentication failure");
	{
		uint8_t buf[4096];
		int err = one(ISCSI_CMD_READ, 0, 1, buf, false);

		check(err == -EIO, "a command fails with %d (want %d)", err,
		      -EIO);
	}
}

/* --- persistent reservations ---------------------------------------------- */

#define PR_REGION_BYTES (64u << 10)

static struct iscsi_pr_cmd prc;
static bool pr_busy;
static int pr_err;

static void pr_cb(struct iscsi_pr_cmd *pr, int err, void *opaque)
{
	if (in_submit)
		check(false, "a PR completion ran inside its call");
	pr_busy = false;
	pr_err = err;
}

static bool pr_idle(void)
{
	return !pr_busy;
}

/* Run one PR call (r: what the call returned) to its end; its errno. */
static int pr_wait(int r)
{
	if (r < 0) {
		pr_busy = false;
		return r;
	}
	return run_until(pr_idle, 30000) ? pr_err : -EINPROGRESS;
}

static void pr_begin(void)
{
	pr_busy = in_submit = true;
}

static int pr_end(int r)
{
	in_submit = false;
	return r;
}

/* A PR call run to its end: its errno (the call's, or done's). */
#define PR(call) (pr_begin(), pr_wait(pr_end(call)))

/* Write region (64 KiB units) of the LUN through c with seed's data. */
static int pr_write(struct iscsi_conn *c, uint32_t region, uint32_t seed)
{
	uint8_t *buf = malloc(PR_REGION_BYTES);
	uint32_t bs;
	int err;

	conn = c;
	bs = iscsi_conn_block_size(c);
	fill(buf, PR_REGION_BYTES, seed);
	err = one(ISCSI_CMD_WRITE, (uint64_t)region * PR_REGION_BYTES / bs,
		  PR_REGION_BYTES / bs, buf, true);
	free(buf);
	return err;
}

/* Read region through c and compare with seed's data. */
static bool pr_holds(struct iscsi_conn *c, uint32_t region, uint32_t seed)
{
	uint8_t *want = malloc(PR_REGION_BYTES), *got = malloc(PR_REGION_BYTES);
	uint32_t bs;
	bool same;
	int err;

	conn = c;
	bs = iscsi_conn_block_size(c);
	fill(want, PR_REGION_BYTES, seed);
	err = one(ISCSI_CMD_READ, (uint64_t)region * PR_REGION_BYTES / bs,
		  PR_REGION_BYTES / bs, got, false);
	same = !err && !memcmp(want, got, PR_REGION_BYTES);
	free(want);
	free(got);
	return same;
}

static void pr_save_region(uint32_t seed)
{
	uint8_t *buf = malloc(PR_REGION_BYTES);
	char path[600];
	FILE *f;

	fill(buf, PR_REGION_BYTES, seed);
	snprintf(path, sizeof(path), "%s/pr-region1.bin", opt.dir);
	f = fopen(path, "w");
	check(f && fwrite(buf, 1, PR_REGION_BYTES, f) == PR_REGION_BYTES &&
		      !fclose(f),
	      "expected bytes of region 1 saved to %s", path);
	free(buf);
}

static void case_pr(struct iscsi_conn *a, struct iscsi_conn *b)
{
	uint64_t ka = iscsi_conn_pr_key("host-a"),
		 kb = iscsi_conn_pr_key("host-b");
	int e;

	check(!PR(iscsi_conn_pr_register(a, &prc, ka, pr_cb, NULL)),
	      "A registers key 0x%016llx", (unsigned long long)ka);
	check(!PR(iscsi_conn_pr_register(b, &prc, kb, pr_cb, NULL)),
	      "B registers key 0x%016llx", (unsigned long long)kb);
	check(!PR(iscsi_conn_pr_reserve(a, &prc, ka, pr_cb, NULL)),
	      "A reserves Write Exclusive - Registrants Only");
	e = PR(iscsi_conn_pr_read_reservation(b, &prc, pr_cb, NULL));
	check(!e && prc.reserved && prc.holder_key == ka &&
		      prc.type == ISCSI_PR_TYPE_WERO,
	      "READ RESERVATION: %d, held %d by 0x%016llx type %u", e,
	      prc.reserved, (unsigned long long)prc.holder_key, prc.type);
	e = pr_write(a, 0, 1);
	check(!e, "A writes region 0: %d", e);
	e = pr_write(b, 1, 2);
	check(!e, "B writes region 1: %d", e);
	check(!PR(iscsi_conn_pr_preempt_abort(b, &prc, kb, ka, pr_cb, NULL)) &&
		      !prc.already_done,
	      "B preempts and aborts A's key");
	e = pr_write(a, 1, 3);
	check(e == -EACCES,
	      "A's write to region 1 after the fence: %d "
	      "(want -EACCES)",
	      e);
	e = pr_write(a, 0, 4);
	check(e == -EACCES, "A's next write: %d (want -EACCES)", e);
	e = pr_write(b, 2, 5);
	check(!e, "B writes region 2: %d", e);
	check(pr_holds(b, 1, 2), "region 1 holds B's data, not A's");
	check(pr_holds(b, 0, 1), "region 0 holds A's write from before");
	check(pr_holds(a, 2, 5), "A still reads (WERO): region 2 is B's");
	e = PR(iscsi_conn_pr_read_keys(b, &prc, pr_cb, NULL));
	check(!e && prc.nr_keys == 1 && prc.keys[0] == kb,
	      "READ KEYS: %d, %u keys, first 0x%016llx", e, prc.nr_keys,
	      (unsigned long long)prc.keys[0]);
	e = PR(iscsi_conn_pr_read_reservation(a, &prc, pr_cb, NULL));
	check(!e && prc.reserved && prc.holder_key == kb &&
		      prc.type == ISCSI_PR_TYPE_WERO,
	      "READ RESERVATION: %d, now held by 0x%016llx type %u", e,
	      (unsigned long long)prc.holder_key, prc.type);
	e = PR(iscsi_conn_pr_preempt_abort(b, &prc, kb, ka, pr_cb, NULL));
	check(!e && prc.already_done, "a repeated preempt: %d, already done %d",
	      e, prc.already_done);
	e = PR(iscsi_conn_pr_preempt_abort(a, &prc, ka, kb, pr_cb, NULL));
	check(e == -EACCES, "the fenced A cannot preempt B back: %d", e);
	conn = b;
	check(!one(ISCSI_CMD_SYNC, 0, 0, NULL, false), "B syncs the LUN");
	pr_save_region(2);
	check(!PR(iscsi_conn_pr_register(a, &prc, ka, pr_cb, NULL)),
	      "A re-admitted (registers again)");
	e = pr_write(a, 3, 6);
	check(!e, "A writes region 3 again: %d", e);
	check(!PR(iscsi_conn_pr_unregister(a, &prc, pr_cb, NULL)) &&
		      !PR(iscsi_conn_pr_unregister(a, &prc, pr_cb, NULL)),
	      "A unregisters, twice (harmless)");
	e = PR(iscsi_conn_pr_read_keys(b, &prc, pr_cb, NULL));
	check(!e && prc.nr_keys == 1 && prc.keys[0] == kb,
	      "READ KEYS after: %u keys", prc.nr_keys);
}

static void case_pr_keys(void)
{
	int e = PR(iscsi_conn_pr_read_keys(conn, &prc, pr_cb, NULL));

	check(!e, "READ KEYS: %s", strerror(-e));
	printf("keys:");
	for (uint32_t i = 0; !e && i < prc.nr_kept; i++)
		printf(" 0x%016llx", (unsigned long long)prc.keys[i]);
	printf("\n");
	e = PR(iscsi_conn_pr_read_reservation(conn, &prc, pr_cb, NULL));
	check(!e, "READ RESERVATION: %s", strerror(-e));
	if (!e && prc.reserved)
		printf("reservation: 0x%016llx type %u\n",
		       (unsigned long long)prc.holder_key, prc.type);
	else if (!e)
		printf("reservation: none\n");
}

static void case_pr_preempt(void)
{
	uint64_t k = iscsi_conn_pr_key(opt.pr_host),
		 v = iscsi_conn_pr_key(opt.pr_victim);

	check(!PR(iscsi_conn_pr_register(conn, &prc, k, pr_cb, NULL)),
	      "%s registers key 0x%016llx", opt.pr_host, (unsigned long long)k);
	check(!PR(iscsi_conn_pr_preempt_abort(conn, &prc, k, v, pr_cb, NULL)),
	      "%s preempts %s (key 0x%016llx)", opt.pr_host, opt.pr_victim,
	      (unsigned long long)v);
}

static void run_pr_case(void)
{
	struct iscsi_conn_cfg cfg = opt.cfg;
	struct iscsi_conn *a = conn, *b;
	int r;

	cfg.initiator = opt.initiator2;
	cfg.name = "harness-b";
	if ((r = iscsi_conn_create(loop, &cfg, &b)) < 0) {
		check(false, "second connection: %s", strerror(-r));
		return;
	}
	conn = b;
	check(run_until(is_up, 15000), "B UP as %s", opt.initiator2);
	if (is_up())
		case_pr(a, b);
	conn = b;
	report();
	conn = a;
	iscsi_conn_destroy(b);
}

/* --- a host's registration, as the lease-fence test needs it ----------------- */

/* Register --host-id's key, reserve WERO unless reserved, write region 0. */
static void case_register(void)
{
	uint64_t key = iscsi_conn_pr_key(opt.host_id);
	int e;

	check(!PR(iscsi_conn_pr_register(conn, &prc, key, pr_cb, NULL)),
	      "%s registers key 0x%016llx", opt.host_id,
	      (unsigned long long)key);
	e = PR(iscsi_conn_pr_read_reservation(conn, &prc, pr_cb, NULL));
	if (!e && !prc.reserved)
		e = PR(iscsi_conn_pr_reserve(conn, &prc, key, pr_cb, NULL));
	if (e == -EACCES)
		e = PR(iscsi_conn_pr_read_reservation(conn, &prc, pr_cb, NULL));
	check(!e, "a WERO reservation on the LUN: %d", e);
	e = pr_write(conn, 0, 7);
	check(!e, "%s writes region 0: %d", opt.host_id, e);
}

/* Keep the registered session until --dir/go; then write. */
static void case_hold(void)
{
	struct iscsi_conn *c = conn;
	int e;

	case_register();
	touch("ready");
	check(wait_flag("go", (uint64_t)opt.seconds * 1000),
	      "%s/go appeared within %u s", opt.dir, opt.seconds);
	e = pr_write(c, 1, 8);
	if (strcmp(opt.expect, "fenced"))
		check(!e, "%s's write after go: %d (want 0)", opt.host_id, e);
	else
		check(e == -EACCES,
		      "%s's write after go: %d (want -EACCES: fenced)",
		      opt.host_id, e);
}

static void case_keys(void)
{
	int e = PR(iscsi_conn_pr_read_keys(conn, &prc, pr_cb, NULL));

	check(!e, "READ KEYS: %d", e);
	if (e)
		return;
	printf("generation %u\n", prc.generation);
	for (uint32_t i = 0; i < prc.nr_kept; i++)
		printf("key 0x%016llx\n", (unsigned long long)prc.keys[i]);
	e = PR(iscsi_conn_pr_read_reservation(conn, &prc, pr_cb, NULL));
	check(!e, "READ RESERVATION: %d", e);
	if (!e && prc.reserved)
		printf("reservation 0x%016llx %u\n",
		       (unsigned long long)prc.holder_key, prc.type);
	else if (!e)
		printf("reservation none\n");
}

/* --- main ----------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: iscsi-conn-harness --portal P --target IQN [--lun N]\n"
		"  [--chap-user U --chap-secret S] [--qd N] [--timeout-ms N]\n"
		"  [--retries N] [--backoff-ms N] [--revive-ms N]\n"
		"  [--expect up|down|fenced] [--expect-unmap yes|no] "
		"[--seconds N]\n"
		"  [--dir DIR] [--initiator IQN] [--initiator2 IQN]\n"
		"  [--pr-host H --pr-victim V] [--host-id ID]\n"
		"  "
		"verify|down|stream|stall|login|pr|pr-keys|pr-preempt|register|"
		"hold|\n"
		"  keys|keyof\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{"portal", 1, NULL, 'p'},      {"target", 1, NULL, 't'},
		{"lun", 1, NULL, 'l'},	       {"chap-user", 1, NULL, 'u'},
		{"chap-secret", 1, NULL, 's'}, {"qd", 1, NULL, 'q'},
		{"timeout-ms", 1, NULL, 'T'},  {"retries", 1, NULL, 'r'},
		{"backoff-ms", 1, NULL, 'b'},  {"revive-ms", 1, NULL, 'R'},
		{"expect", 1, NULL, 'e'},      {"expect-unmap", 1, NULL, 'U'},
		{"seconds", 1, NULL, 'S'},     {"dir", 1, NULL, 'd'},
		{"initiator", 1, NULL, 'i'},   {"initiator2", 1, NULL, 'I'},
		{"pr-host", 1, NULL, 'H'},     {"pr-victim", 1, NULL, 'V'},
		{"host-id", 1, NULL, 'K'},     {NULL, 0, NULL, 0},
	};
	int o;

	opt.cfg.queue_depth = 8;
	opt.expect = "up";
	opt.expect_unmap = "no";
	opt.seconds = 5;
	opt.dir = ".";
	opt.cfg.name = "harness";
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'p':
			opt.cfg.portal = optarg;
			break;
		case 't':
			opt.cfg.target = optarg;
			break;
		case 'l':
			opt.cfg.lun = (uint32_t)atoi(optarg);
			break;
		case 'u':
			opt.cfg.chap_user = optarg;
			break;
		case 's':
			opt.cfg.chap_secret = optarg;
			break;
		case 'q':
			opt.cfg.queue_depth = (uint32_t)atoi(optarg);
			break;
		case 'T':
			opt.cfg.cmd_timeout_ms = (uint32_t)atoi(optarg);
			break;
		case 'r':
			opt.cfg.login_retries = (uint32_t)atoi(optarg);
			break;
		case 'b':
			opt.cfg.login_backoff_ms = (uint32_t)atoi(optarg);
			break;
		case 'R':
			opt.cfg.revive_interval_ms = (uint32_t)atoi(optarg);
			break;
		case 'e':
			opt.expect = optarg;
			break;
		case 'U':
			opt.expect_unmap = optarg;
			break;
		case 'S':
			opt.seconds = (unsigned int)atoi(optarg);
			break;
		case 'd':
			opt.dir = optarg;
			break;
		case 'i':
			opt.cfg.initiator = optarg;
			break;
		case 'I':
			opt.initiator2 = optarg;
			break;
		case 'H':
			opt.pr_host = optarg;
			break;
		case 'V':
			opt.pr_victim = optarg;
			break;
		case 'K':
			opt.host_id = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind == argc - 1 && !strcmp(argv[optind], "keyof") && opt.host_id)
		return;
	if (optind != argc - 1 || !opt.cfg.portal || !opt.cfg.target)
		usage();
	if ((!strcmp(argv[optind], "register") ||
	     !strcmp(argv[optind], "hold")) &&
	    !opt.host_id)
		usage();
	if (!strcmp(argv[optind], "pr") && !opt.initiator2)
		usage();
	if (!strcmp(argv[optind], "pr-preempt") &&
	    (!opt.pr_host || !opt.pr_victim))
		usage();
	if (!opt.cfg.cmd_timeout_ms)
		opt.cfg.cmd_timeout_ms = 10000;
}

int main(int argc, char **argv)
{
	const char *what;
	int r;

	/* As tapdisk does: a write to a connection tgtd dropped (killed in
	 * kill-restart) must be an EPIPE, not a silent death. */
	signal(SIGPIPE, SIG_IGN);
	parse(argc, argv);
	what = argv[optind];
	if (!strcmp(what, "keyof")) {
		printf("0x%016llx\n",
		       (unsigned long long)iscsi_conn_pr_key(opt.host_id));
		return 0;
	}
	td_log_set_level(TD_LOG_INFO);
	if ((r = td_loop_create(&loop)) < 0 ||
	    (r = iscsi_conn_create(loop, &opt.cfg, &conn)) < 0) {
		fprintf(stderr, "set-up failed: %s\n", strerror(-r));
		return 1;
	}
	if (strcmp(what, "down")) {
		run_until(settled, 15000);
		if (strcmp(what, "login"))
			check(is_up(), "UP: %u-byte blocks, %llu blocks (%s)",
			      iscsi_conn_block_size(conn),
			      (unsigned long long)iscsi_conn_nr_blocks(conn),
			      iscsi_conn_error(conn));
	}
	if (!strcmp(what, "down"))
		case_down();
	else if (!is_up() && strcmp(what, "login"))
		; /* nothing more to check */
	else if (!strcmp(what, "verify"))
		case_verify();
	else if (!strcmp(what, "stream"))
		case_stream();
	else if (!strcmp(what, "stall"))
		case_stall();
	else if (!strcmp(what, "login"))
		case_login();
	else if (!strcmp(what, "pr"))
		run_pr_case();
	else if (!strcmp(what, "pr-keys"))
		case_pr_keys();
	else if (!strcmp(what, "pr-preempt"))
		case_pr_preempt();
	else if (!strcmp(what, "register"))
		case_register();
	else if (!strcmp(what, "hold"))
		case_hold();
	else if (!strcmp(what, "keys"))
		case_keys();
	else
		usage();
	report();
	iscsi_conn_destroy(conn);
	td_loop_destroy(loop);
	printf("%s: %s\n", what, failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
