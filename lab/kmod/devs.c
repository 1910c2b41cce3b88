// SPDX-License-Identifier: GPL-2.0
/*
 * A device by name, held until ib_device_put(). ib_core exports
 * ib_device_get_by_name() up to 6.12; 7.2's does not, so there the module
 * is an ib_client and looks among the devices ib_core added to it.
 * ib_core calls a client's remove only once every hold on the device is
 * put (ib_unregister_device waits for them first), so a device found
 * and held here stays until it is put.
 */
#include <linux/mutex.h>
#include <linux/version.h>
#include "apmlab.h"

#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 0, 0)

#define APMLAB_MAX_DEVS 32

static DEFINE_MUTEX(devs_lock);
static struct ib_device *devs[APMLAB_MAX_DEVS];

static int devs_add(struct ib_device *dev)
{
	int i;

	mutex_lock(&devs_lock);
	for (i = 0; i < APMLAB_MAX_DEVS && devs[i]; i++)
		;
	if (i < APMLAB_MAX_DEVS)
		devs[i] = dev;
	mutex_unlock(&devs_lock);
	return i < APMLAB_MAX_DEVS ? 0 : -ENOSPC;
}

static void devs_remove(struct ib_device *dev, void *client_data)
{
	int i;

	mutex_lock(&devs_lock);
	for (i = 0; i < APMLAB_MAX_DEVS; i++)
		if (devs[i] == dev)
			devs[i] = NULL;
	mutex_unlock(&devs_lock);
}

static struct ib_client devs_client = {
	.name = "apmlab",
	.add = devs_add,
	.remove = devs_remove,
};

struct ib_device *apmlab_device_get(const char *name)
{
	struct ib_device *found = NULL;
	int i;

	mutex_lock(&devs_lock);
	for (i = 0; i < APMLAB_MAX_DEVS && !found; i++)
		if (devs[i] && !strcmp(dev_name(&devs[i]->dev), name) &&
		    ib_device_try_get(devs[i]))
			found = devs[i];
	mutex_unlock(&devs_lock);
	return found;
}

int apmlab_devs_init(void)
{
	return ib_register_client(&devs_client);
}

void apmlab_devs_exit(void)
{
	ib_unregister_client(&devs_client);
}

#else

struct ib_device *apmlab_device_get(const char *name)
{
	return ib_device_get_by_name(name, RDMA_DRIVER_UNKNOWN);
}

int apmlab_devs_init(void)
{
	return 0;
}

void apmlab_devs_exit(void)
{
}

#endif
