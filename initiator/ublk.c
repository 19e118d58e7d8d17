/* SPDX-License-Identifier: MIT */
/*
 * ublk device lifecycle through /dev/ublk-control: ADD_DEV, SET_PARAMS,
 * START_DEV, STOP_DEV, DEL_DEV as io_uring URING_CMDs (SQE128), run from
 * the main thread; plus the --ublk main loop.  The queues' I/O path is in
 * ublk_io.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "checked.h"
#include "deadline.h"
#include "log.h"
#include "ublk_priv.h"
#include "wire.h"

#define UBLK_CONTROL "/dev/ublk-control"
#define CTRL_WARN_MS 10000
#define CTRL_GIVE_UP_MS 60000
#define ACK_TIMEOUT_MS 10000
#define UBLK_RESCAN_MS 1000 /* how often the transport looks for removed devices */

/* ---- control commands -------------------------------------------------------- */

struct ctrl_op {
	uint32_t nr; /* legacy opcode */
	uint32_t enc; /* ioctl-encoded opcode */
	const char *name;
	uint32_t give_up_ms; /* 0: CTRL_GIVE_UP_MS */
};

#define CTRL_OP(n, e, str, ...) { .nr = (n), .enc = (e), .name = (str), __VA_ARGS__ }
static const struct ctrl_op OP_GET_FEATURES =
	CTRL_OP(0x13, UBLK_U_CMD_GET_FEATURES, "GET_FEATURES");
static const struct ctrl_op OP_ADD_DEV = CTRL_OP(UBLK_CMD_ADD_DEV, UBLK_U_CMD_ADD_DEV, "ADD_DEV");
static const struct ctrl_op OP_SET_PARAMS =
	CTRL_OP(UBLK_CMD_SET_PARAMS, UBLK_U_CMD_SET_PARAMS, "SET_PARAMS");
static const struct ctrl_op OP_START_DEV =
	CTRL_OP(UBLK_CMD_START_DEV, UBLK_U_CMD_START_DEV, "START_DEV");
static const struct ctrl_op OP_STOP_DEV =
	CTRL_OP(UBLK_CMD_STOP_DEV, UBLK_U_CMD_STOP_DEV, "STOP_DEV");
/* DEL_DEV removes the device at once but then waits until its last user (a
 * mount, a process holding /dev/ublkbN open) lets go: do not wait for that. */
static const struct ctrl_op OP_DEL_DEV =
	CTRL_OP(UBLK_CMD_DEL_DEV, UBLK_U_CMD_DEL_DEV, "DEL_DEV", .give_up_ms = 5000);

uint32_t ublk_io_op(const struct ublk_dev *d, uint32_t op)
{
	if (d->legacy)
		return op;
	return op == UBLK_IO_FETCH_REQ ? UBLK_U_IO_FETCH_REQ : UBLK_U_IO_COMMIT_AND_FETCH_REQ;
}

/*
 * One control command on device dev_id (UINT32_MAX: none yet), waited for.
 * buf must outlive a command we gave up on (it lives in *d, which is then
 * never freed).  Returns the driver's result: 0 or -errno.
 */
static int ctrl_cmd_id(struct ublk_dev *d, uint32_t dev_id, const struct ctrl_op *op, void *buf,
		       uint16_t len, uint64_t data0)
{
	struct ublksrv_ctrl_cmd cmd = {
		.dev_id = dev_id,
		.queue_id = UINT16_MAX, /* not a queue command */
		.len = len,
		.addr = (uint64_t)(uintptr_t)buf,
	};
	uint32_t give_up = op->give_up_ms ? op->give_up_ms : CTRL_GIVE_UP_MS;
	uint32_t warn = give_up < CTRL_WARN_MS ? give_up : CTRL_WARN_MS;
	struct __kernel_timespec ts = { .tv_sec = warn / 1000, .tv_nsec = warn % 1000 * 1000000L };
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	uint64_t start = rb_now_ms();
	int ret;

	if (!d->ctrl_ok)
		return -EIO;
	cmd.data[0] = data0;
	sqe = io_uring_get_sqe(&d->ctrl);
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = d->ctrl_fd;
	sqe->cmd_op = d->legacy ? op->nr : op->enc;
	sqe->user_data = op->nr;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	ret = io_uring_submit(&d->ctrl);
	if (ret < 0) {
		rb_err("%s: %s: io_uring_submit: %s", UBLK_CONTROL, op->name, strerror(-ret));
		return ret;
	}
	for (;;) {
		ret = io_uring_wait_cqe_timeout(&d->ctrl, &cqe, &ts);
		if (ret == -EINTR)
			continue;
		if (ret != -ETIME)
			break;
		if (rb_now_ms() - start >= give_up) {
			rb_log(op == &OP_DEL_DEV ? RB_LOG_WARN : RB_LOG_ERR,
			       "%s: %s for ublk device %d not answered in %u s; giving up on it%s",
			       UBLK_CONTROL, op->name, (int)dev_id, give_up / 1000,
			       op == &OP_DEL_DEV ? " (is the device still mounted or open? the "
						   "kernel frees it once the last user closes it)" :
						   "");
			d->ctrl_ok = false;
			d->ctrl_stuck = true; /* the command still owns buf */
			return -ETIMEDOUT;
		}
		rb_warn("%s: still waiting for %s on ublk device %d (%" PRIu64 " s)", UBLK_CONTROL,
			op->name, (int)dev_id, (rb_now_ms() - start) / 1000);
	}
	if (ret) {
		rb_err("%s: %s: wait: %s", UBLK_CONTROL, op->name, strerror(-ret));
		d->ctrl_ok = false;
		return ret;
	}
	ret = cqe->res;
	io_uring_cqe_seen(&d->ctrl, cqe);
	return ret;
}

/* A control command on this device (or on none before ADD_DEV succeeded). */
static int ctrl_cmd(struct ublk_dev *d, const struct ctrl_op *op, void *buf, uint16_t len,
		    uint64_t data0)
{
	return ctrl_cmd_id(d, d->dev_id < 0 ? UINT32_MAX : (uint32_t)d->dev_id, op, buf, len,
			   data0);
}

/* The control device, or -errno (logged with a hint). */
static int ctrl_open_fd(void)
{
	int fd = open(UBLK_CONTROL, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		int ret = -errno;

		rb_err("%s: %s%s", UBLK_CONTROL, strerror(errno),
		       errno == ENOENT ? " (is the ublk_drv module loaded? modprobe ublk_drv)" :
		       errno == EACCES || errno == EPERM ? " (creating ublk devices needs root)" :
							   "");
		return ret;
	}
	return fd;
}

static int ctrl_open(struct ublk_dev *d)
{
	int ret;

	d->ctrl_fd = ctrl_open_fd();
	if (d->ctrl_fd < 0) {
		ret = d->ctrl_fd;
		d->ctrl_fd = -1;
		return ret;
	}
	ret = io_uring_queue_init(4, &d->ctrl, IORING_SETUP_SQE128);
	if (ret) {
		rb_err("%s: io_uring with 128-byte SQEs: %s%s", UBLK_CONTROL, strerror(-ret),
		       ret == -EINVAL ? " (kernel too old for ublk?)" : "");
		close(d->ctrl_fd);
		d->ctrl_fd = -1;
		return ret;
	}
	d->ctrl_ok = true;
	/* GET_FEATURES exists only with the ioctl-encoded command set. */
	ret = ctrl_cmd(d, &OP_GET_FEATURES, &d->features, sizeof(d->features), 0);
	if (ret) {
		rb_info("%s: no GET_FEATURES (%s): using the legacy command set", UBLK_CONTROL,
			strerror(-ret));
		if (ret == -ETIMEDOUT)
			return ret;
		d->legacy = true;
		d->features = 0;
	} else {
		rb_dbg("%s: driver features %#" PRIx64, UBLK_CONTROL, d->features);
	}
	return 0;
}

static unsigned int ilog2(uint32_t v)
{
	unsigned int n = 0;

	while (v >>= 1)
		n++;
	return n;
}

/* Block device parameters from the export. */
static int fill_params(struct ublk_dev *d)
{
	const struct rb_export_info *in = d->info;
	struct ublk_params *p = &d->params;
	uint32_t bs = in->block_size, pbs = in->phys_block_size;
	uint32_t max_dz;

	if (bs < 512 || bs > (uint32_t)sysconf(_SC_PAGESIZE)) {
		rb_err("export '%s': block size %u: ublk supports 512 bytes up to the page size",
		       in->name, bs);
		return -EINVAL;
	}
	if (pbs < bs || pbs & (pbs - 1))
		pbs = bs;
	memset(p, 0, sizeof(*p));
	p->len = sizeof(*p);
	p->types = UBLK_PARAM_TYPE_BASIC;
	p->basic.logical_bs_shift = (uint8_t)ilog2(bs);
	p->basic.physical_bs_shift = (uint8_t)ilog2(pbs);
	p->basic.io_min_shift = p->basic.physical_bs_shift;
	p->basic.io_opt_shift = p->basic.physical_bs_shift;
	p->basic.max_sectors = d->dinfo.max_io_buf_bytes >> 9;
	p->basic.dev_sectors = in->size / bs * bs >> 9;
	if (in->flags & RB_EXP_READ_ONLY)
		p->basic.attrs |= UBLK_ATTR_READ_ONLY;
	if (in->flags & RB_EXP_ROTATIONAL)
		p->basic.attrs |= UBLK_ATTR_ROTATIONAL;
	/* A volatile cache makes the block layer send FLUSH (and FUA) on. */
	if (in->flags & RB_EXP_FLUSH) {
		p->basic.attrs |= UBLK_ATTR_VOLATILE_CACHE;
		if (in->flags & RB_EXP_FUA)
			p->basic.attrs |= UBLK_ATTR_FUA;
	}
	if (!(in->flags & RB_EXP_READ_ONLY) && (in->flags & (RB_EXP_DISCARD | RB_EXP_WRITE_ZEROES))) {
		max_dz = UBLK_MAX_DISCARD_BYTES / bs * bs >> 9;
		p->types |= UBLK_PARAM_TYPE_DISCARD;
		p->discard.discard_granularity = pbs;
		if (in->flags & RB_EXP_DISCARD) {
			p->discard.max_discard_sectors = max_dz;
			p->discard.max_discard_segments = 1; /* the driver's only choice */
		}
		/* NOUNMAP could not be honoured by a target without NO_HOLE. */
		if ((in->flags & RB_EXP_WRITE_ZEROES) && (in->flags & RB_EXP_NO_HOLE))
			p->discard.max_write_zeroes_sectors = max_dz;
	}
	return 0;
}

/* ---- lifecycle ------------------------------------------------------------------- */

void ublk_dev_ack(struct ublk_dev *d)
{
	pthread_mutex_lock(&d->lock);
	d->acks++;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* Wake ublk_serve's loop: the device stops serving on its own. */
static void dev_event(struct ublk_dev *d)
{
	uint64_t one = 1;

	if (write(d->event_fd, &one, sizeof(one)) < 0)
		rb_err("%s: event: %s", d->bdev, strerror(errno));
}

void ublk_dev_queue_failed(struct ublk_dev *d, unsigned int qid)
{
	int none = -1;

	if (atomic_compare_exchange_strong(&d->failed_qid, &none, (int)qid))
		dev_event(d);
}

void ublk_dev_queue_ended(struct ublk_dev *d)
{
	if (atomic_fetch_add(&d->nr_ended, 1) + 1 == d->nr_queues)
		dev_event(d);
}

/* Wait until acks reaches want; false after ACK_TIMEOUT_MS. */
static bool wait_acks(struct ublk_dev *d, unsigned int want, const char *what)
{
	struct timespec ts = rb_deadline_ts(CLOCK_REALTIME, ACK_TIMEOUT_MS);
	bool ok = true;

	pthread_mutex_lock(&d->lock);
	while (d->acks < want && ok)
		ok = pthread_cond_timedwait(&d->cond, &d->lock, &ts) == 0 || d->acks >= want;
	pthread_mutex_unlock(&d->lock);
	if (!ok)
		rb_err("%s: %s: reactors did not answer in %u s", d->cdev, what,
		       ACK_TIMEOUT_MS / 1000);
	return ok;
}

static int open_cdev(struct ublk_dev *d)
{
	/* devtmpfs creates the node with the device; udev may still be at it. */
	for (int i = 0; i < 50; i++) {
		d->cdev_fd = open(d->cdev, O_RDWR | O_CLOEXEC);
		if (d->cdev_fd >= 0 || errno != ENOENT)
			break;
		usleep(20000);
	}
	if (d->cdev_fd < 0) {
		int ret = -errno;

		rb_err("%s: %s", d->cdev, strerror(errno));
		return ret;
	}
	return 0;
}

int ublk_dev_create(struct ini_session *s, int dev_id, struct ublk_dev **out)
{
	unsigned int nr = rb_session_nr_queues(s);
	uint32_t depth = UINT32_MAX, buf_size = UINT32_MAX;
	struct ublk_dev *d;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->s = s;
	d->info = rb_session_info(s);
	d->ctrl_fd = d->cdev_fd = -1;
	d->dev_id = -1;
	atomic_init(&d->nr_ended, 0);
	atomic_init(&d->failed_qid, -1);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	snprintf(d->bdev, sizeof(d->bdev), "ublk");
	d->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->event_fd < 0) {
		ret = -errno;
		rb_err("eventfd: %s", strerror(errno));
		goto out_free;
	}
	for (unsigned int i = 0; i < nr; i++) {
		struct ini_queue *q = rb_session_queue(s, i);

		if (rb_queue_depth(q) < depth)
			depth = rb_queue_depth(q);
		if (rb_queue_buf_size(q) < buf_size)
			buf_size = rb_queue_buf_size(q);
	}
	if (!nr || depth > UBLK_MAX_QUEUE_DEPTH)
		depth = UBLK_MAX_QUEUE_DEPTH;
	if (nr > UBLK_MAX_NR_QUEUES)
		nr = UBLK_MAX_NR_QUEUES;

	ret = ctrl_open(d);
	if (ret)
		goto out_free;
	d->dinfo = (struct ublksrv_ctrl_dev_info){
		.nr_hw_queues = (uint16_t)nr,
		.queue_depth = (uint16_t)depth,
		.max_io_buf_bytes = buf_size,
		.dev_id = dev_id < 0 ? UINT32_MAX : (uint32_t)dev_id, /* MAX: any free id */
		.ublksrv_pid = getpid(),
		.flags = d->legacy ? 0 : UBLK_F_CMD_IOCTL_ENCODE,
	};
	/* The header names the id asked for, as the info does.  d->dev_id is
	 * set only once the device exists, so a refused ADD_DEV never deletes
	 * the device that holds the id. */
	ret = ctrl_cmd_id(d, d->dinfo.dev_id, &OP_ADD_DEV, &d->dinfo, sizeof(d->dinfo), 0);
	if (ret == -EEXIST && dev_id >= 0) {
		rb_err("%s: ublk device id %d is taken (/dev/ublkb%d belongs to another ublk "
		       "server); choose another ublk-id or leave it out for the first free one",
		       UBLK_CONTROL, dev_id, dev_id);
		goto out_free;
	}
	if (ret) {
		rb_err("%s: ADD_DEV (%u queues x depth %u, %u-byte I/O): %s", UBLK_CONTROL, nr,
		       depth, buf_size, strerror(-ret));
		goto out_free;
	}
	d->dev_id = (int)d->dinfo.dev_id;
	snprintf(d->cdev, sizeof(d->cdev), "/dev/ublkc%d", d->dev_id);
	snprintf(d->bdev, sizeof(d->bdev), "/dev/ublkb%d", d->dev_id);
	/* The driver may trim: fewer queues than CPUs, page-rounded buffers. */
	if (d->dinfo.nr_hw_queues < nr)
		rb_warn("%s: the driver granted %u of %u queues (one per CPU at most); I/O queues "
			"%u..%u stay unused",
			d->bdev, d->dinfo.nr_hw_queues, nr, d->dinfo.nr_hw_queues + 1, nr);
	if (!d->dinfo.nr_hw_queues || d->dinfo.nr_hw_queues > nr ||
	    d->dinfo.queue_depth > depth || !d->dinfo.queue_depth ||
	    d->dinfo.max_io_buf_bytes > buf_size || d->dinfo.max_io_buf_bytes < d->info->block_size) {
		rb_err("%s: ADD_DEV returned %u queues x depth %u, %u-byte I/O, which does not fit",
		       d->bdev, d->dinfo.nr_hw_queues, d->dinfo.queue_depth,
		       d->dinfo.max_io_buf_bytes);
		ret = -EPROTO;
		goto out_free;
	}
	ret = fill_params(d);
	if (ret)
		goto out_free;
	ret = ctrl_cmd(d, &OP_SET_PARAMS, &d->params, sizeof(d->params), 0);
	if (ret) {
		rb_err("%s: SET_PARAMS: %s", d->bdev, strerror(-ret));
		goto out_free;
	}
	ret = open_cdev(d);
	if (ret)
		goto out_free;
	d->queues = calloc(d->dinfo.nr_hw_queues, sizeof(*d->queues));
	if (!d->queues) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (unsigned int i = 0; i < d->dinfo.nr_hw_queues; i++) {
		ret = ublk_queue_alloc(d, i, rb_session_queue(s, i), d->dinfo.queue_depth,
				       d->dinfo.max_io_buf_bytes, &d->queues[i]);
		if (ret)
			goto out_free;
		d->nr_queues = i + 1;
	}
	rb_info("%s: ublk device %d added: %u queues x depth %u, %u-byte I/O, %" PRIu64
		" sectors, block %u/%u%s%s%s%s",
		d->bdev, d->dev_id, d->nr_queues, d->dinfo.queue_depth, d->dinfo.max_io_buf_bytes,
		(uint64_t)d->params.basic.dev_sectors, 1u << d->params.basic.logical_bs_shift,
		1u << d->params.basic.physical_bs_shift,
		d->params.basic.attrs & UBLK_ATTR_READ_ONLY ? ", read-only" : "",
		d->params.basic.attrs & UBLK_ATTR_VOLATILE_CACHE ? ", write cache" : "",
		d->params.basic.attrs & UBLK_ATTR_FUA ? ", fua" : "",
		d->params.types & UBLK_PARAM_TYPE_DISCARD ? ", discard/write-zeroes" : "");
	*out = d;
	return 0;

out_free:
	ublk_dev_stop(d);
	ublk_dev_free(d);
	return ret;
}

int ublk_dev_start(struct ublk_dev *d)
{
	unsigned int posted = 0;
	int ret;

	pthread_mutex_lock(&d->lock);
	d->acks = 0;
	pthread_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < d->nr_queues; i++) {
		d->queues[i]->start_posted = true;
		rb_reactor_post(d->queues[i]->r, &d->queues[i]->start_task);
		posted++;
	}
	if (!wait_acks(d, posted, "start"))
		return -ETIMEDOUT;
	for (unsigned int i = 0; i < d->nr_queues; i++)
		if (d->queues[i]->start_err)
			return d->queues[i]->start_err;
	/* Returns once every tag's FETCH is in; partitions are scanned by now. */
	ret = ctrl_cmd(d, &OP_START_DEV, NULL, 0, (uint64_t)getpid());
	if (ret) {
		rb_err("%s: START_DEV: %s", d->bdev, strerror(-ret));
		return ret;
	}
	d->started = true;
	return 0;
}

const char *ublk_dev_path(const struct ublk_dev *d)
{
	return d->bdev;
}

int ublk_dev_event_fd(const struct ublk_dev *d)
{
	return d->event_fd;
}

void ublk_dev_stop(struct ublk_dev *d)
{
	unsigned int posted = 0;
	int ret;

	if (!d)
		return;
	/* The driver drains in-flight requests (our reactors complete them),
	 * then no new ones come. */
	if (d->started) {
		ret = ctrl_cmd(d, &OP_STOP_DEV, NULL, 0, 0);
		if (ret)
			rb_err("%s: STOP_DEV: %s", d->bdev, strerror(-ret));
		d->started = false;
	}
	pthread_mutex_lock(&d->lock);
	d->acks = 0;
	pthread_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < d->nr_queues; i++) {
		struct ublk_queue *uq = d->queues[i];

		if (!uq->start_posted)
			continue;
		uq->start_posted = false;
		rb_reactor_post(uq->r, &uq->stop_task);
		posted++;
	}
	if (posted && !wait_acks(d, posted, "stop")) {
		/* The queues may still use the device; leave it to exit. */
		d->ctrl_ok = false;
		return;
	}
	/* Mappings and the fd pin the device: DEL_DEV waits for both. */
	for (unsigned int i = 0; i < d->nr_queues; i++)
		ublk_queue_unmap(d->queues[i]);
	if (d->cdev_fd >= 0)
		close(d->cdev_fd);
	d->cdev_fd = -1;
	if (d->dev_id >= 0 && d->ctrl_ok) {
		ret = ctrl_cmd(d, &OP_DEL_DEV, NULL, 0, 0);
		if (ret && ret != -ETIMEDOUT) /* a timeout was logged with its reason */
			rb_err("%s: DEL_DEV: %s", d->bdev, strerror(-ret));
		else
			rb_info("%s: ublk device %d deleted", d->bdev, d->dev_id);
		if (ret != -ETIMEDOUT)
			d->dev_id = -1;
	}
}

void ublk_dev_free(struct ublk_dev *d)
{
	if (!d)
		return;
	if (d->ctrl_stuck || (!d->ctrl_ok && d->dev_id >= 0)) {
		/* A control command may still write into *d, or the device is
		 * still there: leave both to process exit. */
		rb_warn("%s: ublk device %d left behind", d->bdev, d->dev_id);
		return;
	}
	for (unsigned int i = 0; i < d->nr_queues; i++)
		ublk_queue_free(d->queues[i]);
	free(d->queues);
	if (d->ctrl_fd >= 0) {
		io_uring_queue_exit(&d->ctrl);
		close(d->ctrl_fd);
	}
	if (d->event_fd >= 0)
		close(d->event_fd);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* ---- --ublk main loop ---------------------------------------------------------------- */

int ublk_serve(const struct rb_session_params *p, int dev_id, int sig_fd)
{
	struct ini_session *s = NULL;
	struct ublk_dev *d = NULL;
	int ret;

	/* No driver or no permission: say so before bothering the target. */
	ret = ctrl_open_fd();
	if (ret < 0)
		return ret;
	close(ret);
	ret = rb_session_open(p, &s);
	if (ret)
		return ret;
	ret = ublk_dev_create(s, dev_id, &d);
	if (ret)
		goto out_close_session;
	ret = rb_session_start(s);
	if (ret)
		goto out_stop_dev;
	ret = ublk_dev_start(d);
	if (ret)
		goto out_stop_dev;
	printf("attached %s\n", ublk_dev_path(d));
	fflush(stdout);
	sd_notifyf(0, "READY=1\nSTATUS=serving %s from %s on %s", rb_session_info(s)->name,
		   rb_session_target(s), ublk_dev_path(d));
	rb_info("ready: export '%s' from %s on %s", rb_session_info(s)->name,
		rb_session_target(s), ublk_dev_path(d));

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = sig_fd, .events = POLLIN },
			{ .fd = ublk_dev_event_fd(d), .events = POLLIN },
		};
		struct signalfd_siginfo si;
		int n = poll(pfd, 2, UBLK_RESCAN_MS);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			rb_err("poll: %s", strerror(errno));
			break;
		}
		/* Nothing else wakes this loop: a quiet second is a second. */
		if (n == 0)
			p->ops->rescan();
		if ((pfd[0].revents & POLLIN) && read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
			rb_info("signal %u: detaching %s", si.ssi_signo, ublk_dev_path(d));
			break;
		}
		if (pfd[1].revents & POLLIN) {
			int qid = atomic_load(&d->failed_qid);

			if (qid >= 0) {
				rb_err("%s: ublk queue %d failed; the device stops and its I/O "
				       "fails; exiting",
				       ublk_dev_path(d), qid);
				ret = -EIO;
			} else {
				rb_err("%s: the ublk device was removed; exiting",
				       ublk_dev_path(d));
				ret = -ENODEV;
			}
			break;
		}
	}
	sd_notify(0, "STOPPING=1");
	/* A reconnect in progress parks the reactors STOP_DEV needs. */
	rb_session_cancel_recovery(s);

out_stop_dev:
	ublk_dev_stop(d);
out_close_session:
	rb_session_close(s);
	ublk_dev_free(d);
	return ret;
}
