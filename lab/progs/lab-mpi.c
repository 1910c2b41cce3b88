// SPDX-License-Identifier: GPL-2.0
/*
 * lab-mpi: an MPI ping-pong between ranks 0 and 1 for --seconds, with
 * payloads every byte of which the receiver checks. Run under mpirun with
 * two ranks (lab: one per ibsim HCA, through Open MPI's openib BTL).
 *
 * Each iteration sends one message of every size in --sizes from rank 0 to
 * rank 1 and back. The payload is a pattern made from the iteration, the
 * size and the direction, so a message delivered twice, late, truncated or
 * into the wrong buffer shows as mismatched bytes. Rank 0 prints a progress
 * line (JSON) on stderr every second and, at the end, one JSON line on
 * stdout:
 *   {"iterations":N,"messages":M,"bytes":B,"errors":E,"seconds":S,...}
 * errors is the number of mismatched bytes (and wrong lengths) seen by both
 * ranks; every rank exits 0 only when it is 0.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#define MAX_SIZES 16
#define TAG_DATA 1
#define TAG_STOP 2

static const char *prog = "lab-mpi";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [--seconds N] [--sizes B,B,...]\n"
		"  --seconds N   run the ping-pong for N seconds (default 10)\n"
		"  --sizes LIST  message sizes in bytes (default 64,262144: eager and rendezvous)\n"
		"Two ranks: rank 0 prints one JSON line on stdout, progress on stderr.\n",
		prog);
}

/* The expected byte stream of one message: a xorshift64 sequence seeded from
 * the iteration, the size and the direction (0: rank 0 -> 1, 1: back). */
static void pattern(uint8_t *buf, size_t len, uint64_t iter, size_t size, int dir)
{
	uint64_t x = (iter + 1) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)size << 17 ^ (uint64_t)dir << 61;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		buf[i] = (uint8_t)(x >> (8 * (i % 8)));
	}
}

/* Counts the bytes of got that differ from the pattern (a wrong length
 * counts the missing or extra bytes too). */
static uint64_t check(const uint8_t *got, int got_len, uint8_t *want, size_t size,
		      uint64_t iter, int dir)
{
	uint64_t bad = 0;
	size_t n = (size_t)got_len < size ? (size_t)got_len : size;

	pattern(want, size, iter, size, dir);
	for (size_t i = 0; i < n; i++)
		bad += got[i] != want[i];
	bad += (size_t)got_len > size ? (size_t)got_len - size : size - n;
	return bad;
}

static int parse_sizes(const char *s, size_t *sizes)
{
	int n = 0;
	char *end;

	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s || v == 0 || v > (1ULL << 30) || n == MAX_SIZES)
			return -1;
		sizes[n++] = v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"seconds", required_argument, NULL, 's'},
		{"sizes", required_argument, NULL, 'z'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	size_t sizes[MAX_SIZES] = {64, 262144}, max = 0;
	int nsizes = 2, rank, nranks, c;
	double seconds = 10;
	char *end;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			seconds = strtod(optarg, &end);
			if (*end || seconds <= 0) {
				fprintf(stderr, "%s: bad --seconds %s (try --help)\n", prog, optarg);
				return 2;
			}
			break;
		case 'z':
			nsizes = parse_sizes(optarg, sizes);
			if (nsizes <= 0) {
				fprintf(stderr, "%s: bad --sizes %s (try --help)\n", prog, optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "%s: try --help\n", prog);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument %s (try --help)\n", prog, argv[optind]);
		return 2;
	}

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2) {
		if (rank == 0)
			fprintf(stderr, "%s: needs exactly 2 ranks, got %d\n", prog, nranks);
		MPI_Finalize();
		return 2;
	}
	for (int i = 0; i < nsizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	uint8_t *buf = malloc(max), *want = malloc(max);
	if (!buf || !want) {
		fprintf(stderr, "%s: rank %d: out of memory\n", prog, rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	uint64_t iter = 0, messages = 0, bytes = 0, errors = 0;
	double start = MPI_Wtime(), next_progress = start + 1, now = start;
	MPI_Status st;
	int len;

	if (rank == 0) {
		for (; (now = MPI_Wtime()) - start < seconds; iter++) {
			for (int i = 0; i < nsizes; i++) {
				pattern(buf, sizes[i], iter, sizes[i], 0);
				MPI_Send(buf, (int)sizes[i], MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
				memset(buf, 0, sizes[i]);
				MPI_Recv(buf, (int)max, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &len);
				errors += check(buf, len, want, sizes[i], iter, 1);
				messages += 2;
				bytes += sizes[i] + (uint64_t)len;
			}
			if (now >= next_progress) {
				fprintf(stderr, "{\"progress\":true,\"elapsed\":%.1f,\"iterations\":%" PRIu64
					",\"bytes\":%" PRIu64 ",\"errors\":%" PRIu64 "}\n",
					now - start, iter, bytes, errors);
				fflush(stderr);
				next_progress += 1;
			}
		}
		MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_STOP, MPI_COMM_WORLD);
	} else {
		for (;; iter++) {
			for (int i = 0; i < nsizes; i++) {
				memset(buf, 0, sizes[i]);
				MPI_Recv(buf, (int)max, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
				if (st.MPI_TAG == TAG_STOP)
					goto done;
				MPI_Get_count(&st, MPI_BYTE, &len);
				errors += check(buf, len, want, sizes[i], iter, 0);
				pattern(buf, sizes[i], iter, sizes[i], 1);
				MPI_Send(buf, (int)sizes[i], MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
			}
		}
	}
done:;
	double elapsed = MPI_Wtime() - start;
	uint64_t total = 0, peer = 0;

	MPI_Allreduce(&errors, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	peer = total - errors;
	if (rank == 0) {
		printf("{\"iterations\":%" PRIu64 ",\"messages\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"errors\":%" PRIu64 ",\"seconds\":%.3f,\"errors_rank0\":%" PRIu64
		       ",\"errors_rank1\":%" PRIu64 ",\"sizes\":[",
		       iter, messages, bytes, total, elapsed, errors, peer);
		for (int i = 0; i < nsizes; i++)
			printf("%s%zu", i ? "," : "", sizes[i]);
		printf("]}\n");
		fflush(stdout);
	}
	free(buf);
	free(want);
	MPI_Finalize();
	return total == 0 ? 0 : 1;
}
