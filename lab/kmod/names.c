// SPDX-License-Identifier: GPL-2.0
/* Names for the enums the control interface prints and parses. */
#include <linux/kernel.h>
#include <linux/string.h>
#include "apmlab.h"

/* Indexed by enum ib_event_type (identical in 6.1 and 6.12). */
static const char *const event_names[] = {
	[IB_EVENT_CQ_ERR] = "CQ_ERR",
	[IB_EVENT_QP_FATAL] = "QP_FATAL",
	[IB_EVENT_QP_REQ_ERR] = "QP_REQ_ERR",
	[IB_EVENT_QP_ACCESS_ERR] = "QP_ACCESS_ERR",
	[IB_EVENT_COMM_EST] = "COMM_EST",
	[IB_EVENT_SQ_DRAINED] = "SQ_DRAINED",
	[IB_EVENT_PATH_MIG] = "PATH_MIG",
	[IB_EVENT_PATH_MIG_ERR] = "PATH_MIG_ERR",
	[IB_EVENT_DEVICE_FATAL] = "DEVICE_FATAL",
	[IB_EVENT_PORT_ACTIVE] = "PORT_ACTIVE",
	[IB_EVENT_PORT_ERR] = "PORT_ERR",
	[IB_EVENT_LID_CHANGE] = "LID_CHANGE",
	[IB_EVENT_PKEY_CHANGE] = "PKEY_CHANGE",
	[IB_EVENT_SM_CHANGE] = "SM_CHANGE",
	[IB_EVENT_SRQ_ERR] = "SRQ_ERR",
	[IB_EVENT_SRQ_LIMIT_REACHED] = "SRQ_LIMIT_REACHED",
	[IB_EVENT_QP_LAST_WQE_REACHED] = "QP_LAST_WQE_REACHED",
	[IB_EVENT_CLIENT_REREGISTER] = "CLIENT_REREGISTER",
	[IB_EVENT_GID_CHANGE] = "GID_CHANGE",
	[IB_EVENT_WQ_FATAL] = "WQ_FATAL",
};

const char *apmlab_event_name(int event)
{
	if (event < 0 || event >= ARRAY_SIZE(event_names))
		return "UNKNOWN";
	return event_names[event];
}

int apmlab_event_parse(const char *s)
{
	unsigned int n;
	int i;

	if (!kstrtouint(s, 0, &n))
		return n < ARRAY_SIZE(event_names) ? n : -EINVAL;
	for (i = 0; i < ARRAY_SIZE(event_names); i++)
		if (!strcasecmp(s, event_names[i]))
			return i;
	return -EINVAL;
}

static const char *const qps_names[] = {
	[IB_QPS_RESET] = "RESET", [IB_QPS_INIT] = "INIT", [IB_QPS_RTR] = "RTR",
	[IB_QPS_RTS] = "RTS", [IB_QPS_SQD] = "SQD", [IB_QPS_SQE] = "SQE",
	[IB_QPS_ERR] = "ERR",
};

const char *apmlab_qps_name(int state)
{
	if (state < 0 || state >= ARRAY_SIZE(qps_names))
		return "UNKNOWN";
	return qps_names[state];
}

const char *apmlab_mig_name(int mig)
{
	switch (mig) {
	case IB_MIG_MIGRATED:
		return "MIGRATED";
	case IB_MIG_REARM:
		return "REARM";
	case IB_MIG_ARMED:
		return "ARMED";
	}
	return "UNKNOWN";
}
