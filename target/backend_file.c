/* SPDX-License-Identifier: MIT */
/*
 * Export backends: regular files and block devices, both through io_uring
 * with the reactor's fixed buffers.  Mapping of commands:
 *   READ/WRITE     READ_FIXED / WRITE_FIXED
 *   FUA WRITE      WRITE_FIXED with RWF_DSYNC (write then datasync of that
 *                  range; a block device turns it into a FUA write)
 *   FLUSH          FSYNC with IORING_FSYNC_DATASYNC
 *   DISCARD        fallocate PUNCH_HOLE|KEEP_SIZE (file: hole; block device:
 *                  the kernel's write-zeroes without fallback, which may
 *                  unmap).  Advisory: where unsupported it is a successful
 *                  no-op, and the export stops trying.
 *   WRITE_ZEROES   the first supported method of a chain (a request that
 *                  gets EOPNOTSUPP, or EINVAL for a mode the file system
 *                  does not know, moves on; the export remembers the first
 *                  supported one):
 *     file, may deallocate: ZERO_RANGE|KEEP_SIZE -> PUNCH_HOLE|KEEP_SIZE
 *                  -> write zeroes
 *     file, NO_HOLE: ZERO_RANGE|KEEP_SIZE -> PUNCH_HOLE|KEEP_SIZE, then
 *                  fallocate 0 over the range (zeroes, allocated again: the
 *                  fast path on tmpfs, as in nbdkit's file plugin) -> write
 *                  zeroes
 *     block device, may deallocate: PUNCH_HOLE|KEEP_SIZE (blkdev_fallocate:
 *                  zeroout with BLKDEV_ZERO_NOFALLBACK, may unmap; EOPNOTSUPP
 *                  without native write-zeroes) -> ZERO_RANGE -> write zeroes
 *     block device, NO_HOLE: ZERO_RANGE (zeroout with BLKDEV_ZERO_NOUNMAP;
 *                  the kernel writes zeroes itself when the device has no
 *                  write-zeroes) -> write zeroes
 *                  "Write zeroes" writes from a registered zero buffer, in
 *                  chunks, through io_uring like any write.  FUA adds a
 *                  datasync.  FAST_ZERO fails with NOT_SUPPORTED instead of
 *                  writing: when the chain reaches "write zeroes", and on a
 *                  block device without native write-zeroes (its
 *                  queue/write_zeroes_max_bytes is 0) at once.
 * Buffered exports (direct = no) with inline-writes = yes do page-aligned
 * writes with pwrite in the reactor instead (see tgt_io_write_inline).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"
#include "target.h"

/* ---- I/O: the same for both kinds, io_uring on the export's fd --------------- */

static void fd_prep_read(struct tgt_export *e, struct io_uring_sqe *sqe, void *buf, uint32_t len,
		      uint64_t off, int buf_index)
{
	io_uring_prep_read_fixed(sqe, e->fd, buf, len, off, buf_index);
}

static void fd_prep_write(struct tgt_export *e, struct io_uring_sqe *sqe, const void *buf,
		       uint32_t len, uint64_t off, int buf_index, bool fua)
{
	io_uring_prep_write_fixed(sqe, e->fd, buf, len, off, buf_index);
	if (fua)
		sqe->rw_flags = RWF_DSYNC;
}

static void fd_prep_flush(struct tgt_export *e, struct io_uring_sqe *sqe)
{
	io_uring_prep_fsync(sqe, e->fd, IORING_FSYNC_DATASYNC);
}

static void fd_prep_discard(struct tgt_export *e, struct io_uring_sqe *sqe, uint64_t off, uint64_t len)
{
	io_uring_prep_fallocate(sqe, e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
}

static void fd_prep_zero(struct tgt_export *e, struct io_uring_sqe *sqe, enum tgt_zero_method m,
		      int step, uint64_t off, uint64_t len)
{
	int mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

	if (m == TGT_ZM_ZERO_RANGE)
		mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	else if (m == TGT_ZM_PUNCH_ALLOC && step == 1)
		mode = 0; /* allocate the hole just punched (reads zeroes) */
	io_uring_prep_fallocate(sqe, e->fd, mode, off, len);
}

/* pwrite all of it: a short write means the next one says why (ENOSPC). */
static int fd_write_now(struct tgt_export *e, const void *buf, uint32_t len, uint64_t off)
{
	uint32_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pwrite(e->fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (uint32_t)n;
	}
	return (int)done;
}

/*
 * Whether the reactor writes this command itself.  A buffered write of whole
 * pages is a copy into the page cache; ext4 and most file systems cannot do it
 * without possibly blocking, so io_uring hands each one to a worker thread,
 * and it serialises a file's buffered writes there: a thread switch and a
 * wake-up per write (bench/ab-cpu.sh, 4 KiB randwrite: 22-24 against 14-17 us
 * of target CPU per write, 43-49k against 56-68k IOPS).  A partial page may
 * need a read from the disk first and a FUA write waits for it: those stay
 * asynchronous.  The cost, why it is
 * not the default: the reactor, and every queue on it, waits while a write
 * blocks (dirty throttling, a frozen file system).
 */
bool tgt_io_write_inline(const struct tgt_export *e, uint64_t off, uint32_t len, bool fua)
{
	return e->inline_writes && !fua && off % e->page_size == 0 && len % e->page_size == 0;
}

/* ---- the two kinds of backing store ------------------------------------------ */

static int probe_file(struct tgt_export *e)
{
	struct statx stx;

	if (statx(e->fd, "", AT_EMPTY_PATH, STATX_SIZE | STATX_DIOALIGN, &stx) < 0)
		return -errno;
	e->size = stx.stx_size;
	e->block_size = 512;
	/* O_DIRECT needs offsets aligned to what the file system reports. */
	if (e->direct && (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align > 512)
		e->block_size = stx.stx_dio_offset_align;
	e->phys_block_size = stx.stx_blksize > e->block_size ? stx.stx_blksize : e->block_size;
	if (e->phys_block_size > 65536)
		e->phys_block_size = e->block_size;
	e->flags |= RB_EXP_FLUSH | RB_EXP_FUA | RB_EXP_DISCARD | RB_EXP_WRITE_ZEROES |
		    RB_EXP_NO_HOLE | RB_EXP_FAST_ZERO;
	e->zero_fast = true; /* every method short of writing is */
	return 0;
}

static bool read_u64(const char *path, uint64_t *v)
{
	unsigned long long x;
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "%llu", &x) == 1;
	fclose(f);
	*v = ok ? x : 0;
	return ok;
}

/* The device's native write-zeroes limit (0: none, the kernel would write). */
static uint64_t blockdev_write_zeroes_max(dev_t rdev)
{
	char path[96];
	uint64_t v = 0;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/write_zeroes_max_bytes",
		 major(rdev), minor(rdev));
	if (read_u64(path, &v))
		return v;
	/* A partition: its disk's queue. */
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/write_zeroes_max_bytes",
		 major(rdev), minor(rdev));
	read_u64(path, &v);
	return v;
}

static int probe_blockdev(struct tgt_export *e)
{
	uint64_t size;
	int lbs, pbs;
	unsigned short rot = 0;

	if (ioctl(e->fd, BLKGETSIZE64, &size) < 0)
		return -errno;
	if (ioctl(e->fd, BLKSSZGET, &lbs) < 0)
		return -errno;
	if (ioctl(e->fd, BLKPBSZGET, &pbs) < 0)
		pbs = lbs;
	e->size = size;
	e->block_size = (uint32_t)lbs;
	e->phys_block_size = (uint32_t)pbs;
	e->flags |= RB_EXP_FLUSH | RB_EXP_FUA | RB_EXP_DISCARD | RB_EXP_WRITE_ZEROES |
		    RB_EXP_NO_HOLE | RB_EXP_FAST_ZERO;
	e->zero_fast = blockdev_write_zeroes_max(e->dev) > 0;
	if (ioctl(e->fd, BLKROTATIONAL, &rot) == 0 && rot)
		e->flags |= RB_EXP_ROTATIONAL;
	return 0;
}

static const struct tgt_zero_chain file_zero_chains[TGT_ZC_NR] = {
	[TGT_ZC_DEALLOC] = { 3, { TGT_ZM_ZERO_RANGE, TGT_ZM_PUNCH, TGT_ZM_WRITE } },
	[TGT_ZC_NO_HOLE] = { 3, { TGT_ZM_ZERO_RANGE, TGT_ZM_PUNCH_ALLOC, TGT_ZM_WRITE } },
};

static const struct tgt_zero_chain blockdev_zero_chains[TGT_ZC_NR] = {
	[TGT_ZC_DEALLOC] = { 3, { TGT_ZM_PUNCH, TGT_ZM_ZERO_RANGE, TGT_ZM_WRITE } },
	[TGT_ZC_NO_HOLE] = { 2, { TGT_ZM_ZERO_RANGE, TGT_ZM_WRITE } },
};

/* Files and block devices do their I/O alike: io_uring on the export's fd. */
#define FD_IO_OPS                                                                                  \
	.prep_read = fd_prep_read, .prep_write = fd_prep_write, .prep_flush = fd_prep_flush,       \
	.prep_discard = fd_prep_discard, .prep_zero = fd_prep_zero, .write_now = fd_write_now

const struct tgt_backend tgt_backend_file = {
	.name = "file",
	.probe = probe_file,
	.zero_chains = file_zero_chains,
	FD_IO_OPS,
};

const struct tgt_backend tgt_backend_blockdev = {
	.name = "blockdev",
	.probe = probe_blockdev,
	.zero_chains = blockdev_zero_chains,
	FD_IO_OPS,
};
