// SPDX-License-Identifier: GPL-2.0
/*
 * Firmware knobs: what an HCA decides where no source says what ConnectX
 * firmware does. Each has the value rdmavt's source gives (profile ibta,
 * the default) and the mlx5 guess that differs most (profile mlx5):
 *
 *   armed-modify refuse|accept
 *	modify PATH_MIG_STATE=ARMED. rdmavt rvt_modify_qp: EINVAL (IBTA:
 *	software cannot command Arm). mlx4/mlx5 write PM_ARMED into the QPC
 *	with the PM_STATE opt param: firmware decides.
 *   forced-event none|inside|after
 *	PATH_MIG at the side that forced a migration (MIGRATED while ARMED).
 *	rdmavt raises it from inside rvt_modify_qp, after unlocking, before
 *	the call returns; the mlx5 driver raises nothing from modify, so any
 *	event is a firmware EQE, after the call returned, or none.
 *   alt-after-migration copy|zero
 *	the alternate path a query reads after a migration. IBTA ("once a
 *	migration has occurred, a QP's primary and alternate path information
 *	are the same"), hfi1/qib *_migrate_qp, rvt_query_qp: copy. mlx5
 *	reads the firmware's secondary address path: zero is the guess.
 *   dead-alternate retry|pathmig-err
 *	retry exhaustion on an ARMED QP whose alternate is dead. hfi1/qib
 *	*_restart_rc migrate blindly (PATH_MIG), then the alternate's retries
 *	run out (RETRY_EXC_ERR, ERR). mlx4/mlx5 forward firmware's
 *	PATH_MIG_FAILED: pathmig-err raises PATH_MIG_ERR instead of
 *	migrating, then the QP goes to ERR.
 *   pm-latency 0|1500ms|3s
 *	how long a modify with PATH_MIG_STATE (a rearm, a forced migration)
 *	takes before it runs. rdmavt runs it inside the call; mlx4/mlx5 send
 *	it to the firmware as a command (RTS2RTS with the PM_STATE opt
 *	param) and wait for its completion, bounded only by the command
 *	timeout (mlx5 MLX5_CMD_TIMEOUT_MSEC, 60 s): firmware decides. Both
 *	profiles leave it at 0.
 *   unloaded-alt-port 0|1
 *	the alternate port a query reads from a QP with no alternate loaded
 *	(alt_ah_attr.port_num, alt_port_num). rdmavt rvt_query_qp copies the
 *	QP's zeroed alt_ah_attr; mlx5 to_rdma_ah_attr leaves the AV empty
 *	for a path with port 0: 0. mlx4 to_rdma_ah_attr decodes the port
 *	from the path's sched_queue bit 6, so a path the firmware left zero
 *	reads port 1: 1. What firmware leaves in an unused path: firmware
 *	decides. Both profiles leave it at 0. ib_uverbs refuses an alternate
 *	load whose AV port differs from alt_port_num, so this decides
 *	whether an application that loads an alternate on top of a query
 *	(Open MPI's openib) gets it through.
 *
 * Knobs are read and written under ibsim_mutex.
 */
#include <linux/string.h>
#include "ibsim.h"

struct knob {
	const char *name;
	const char *const *values;
	int nvalues;
};

static const char *const armed_values[] = { "refuse", "accept" };
static const char *const forced_values[] = { "none", "inside", "after" };
static const char *const alt_values[] = { "copy", "zero" };
static const char *const dead_values[] = { "retry", "pathmig-err" };
static const char *const pmlat_values[] = { "0", "1500ms", "3s" };
static const unsigned int pmlat_ms[] = { 0, 1500, 3000 };
static const char *const unloaded_values[] = { "0", "1" };

static const struct knob knobs[IBSIM_KNOBS] = {
	[KNOB_ARMED_MODIFY] = { "armed-modify", armed_values, ARRAY_SIZE(armed_values) },
	[KNOB_FORCED_EVENT] = { "forced-event", forced_values, ARRAY_SIZE(forced_values) },
	[KNOB_ALT_AFTER_MIG] = { "alt-after-migration", alt_values, ARRAY_SIZE(alt_values) },
	[KNOB_DEAD_ALT] = { "dead-alternate", dead_values, ARRAY_SIZE(dead_values) },
	[KNOB_PM_LATENCY] = { "pm-latency", pmlat_values, ARRAY_SIZE(pmlat_values) },
	[KNOB_UNLOADED_ALT_PORT] = { "unloaded-alt-port", unloaded_values, ARRAY_SIZE(unloaded_values) },
};

static const int profile_ibta[IBSIM_KNOBS] = {
	ARMED_REFUSE, FORCED_INSIDE, ALT_COPY, DEADALT_RETRY, PMLAT_0,
	UNLOADED_ALT_PORT0,
};
static const int profile_mlx5[IBSIM_KNOBS] = {
	ARMED_ACCEPT, FORCED_NONE, ALT_ZERO, DEADALT_PATHMIG_ERR, PMLAT_0,
	UNLOADED_ALT_PORT0,
};

int ibsim_knob[IBSIM_KNOBS] = {
	ARMED_REFUSE, FORCED_INSIDE, ALT_COPY, DEADALT_RETRY, PMLAT_0,
	UNLOADED_ALT_PORT0,
};

/* The pm-latency knob in milliseconds. */
unsigned int ibsim_pm_latency_ms(void)
{
	return pmlat_ms[READ_ONCE(ibsim_knob[KNOB_PM_LATENCY])];
}

int ibsim_knob_set(const char *name, const char *value)
{
	int k, v;

	for (k = 0; k < IBSIM_KNOBS; k++) {
		if (strcmp(name, knobs[k].name))
			continue;
		for (v = 0; v < knobs[k].nvalues; v++) {
			if (!strcmp(value, knobs[k].values[v])) {
				mutex_lock(&ibsim_mutex);
				ibsim_knob[k] = v;
				mutex_unlock(&ibsim_mutex);
				return 0;
			}
		}
		return -EINVAL;
	}
	return -ENOENT;
}

int ibsim_profile_set(const char *name)
{
	const int *p;

	if (!strcmp(name, "ibta"))
		p = profile_ibta;
	else if (!strcmp(name, "mlx5"))
		p = profile_mlx5;
	else
		return -ENOENT;
	mutex_lock(&ibsim_mutex);
	memcpy(ibsim_knob, p, sizeof(ibsim_knob));
	mutex_unlock(&ibsim_mutex);
	return 0;
}

/* One "NAME VALUE" line per knob. */
void ibsim_knobs_show(struct seq_file *m)
{
	int k;

	mutex_lock(&ibsim_mutex);
	for (k = 0; k < IBSIM_KNOBS; k++)
		seq_printf(m, "%s %s\n", knobs[k].name,
			   knobs[k].values[ibsim_knob[k]]);
	mutex_unlock(&ibsim_mutex);
}
