/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Device names: records carry the device's index (read_dev); a device that
 * registers (ib_register_device) or is renamed (ib_device_rename) sends its
 * index and name once, in order with the records that follow, and the
 * collector resolves every index from these (and rdma netlink for devices
 * that were there before it started). fexit, after success; the kprobe of
 * ib_device_rename reads the new name from its argument.
 */
#ifndef APMWATCH_DEV_BPF_H
#define APMWATCH_DEV_BPF_H

static __always_inline void dev_name(struct ib_device *dev, const char *name, __u64 ip)
{
	if (!dev)
		return;
	struct apm_record *r = new_record(APM_KIND_DEV_NAME, ip);
	if (!r)
		return;
	read_dev(r, dev);
	bpf_probe_read_kernel_str(r->dev, sizeof(r->dev), name);
	emit(r);
}

SEC("fexit/ib_register_device")
int BPF_PROG(fexit_dev_register, struct ib_device *dev)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	if ((int)ret == 0)
		dev_name(dev, dev->name, bpf_get_func_ip(ctx));
	return 0;
}

SEC("fexit/ib_device_rename")
int BPF_PROG(fexit_dev_rename, struct ib_device *dev)
{
	__u64 ret = 0;
	bpf_get_func_ret(ctx, &ret);
	if ((int)ret == 0)
		dev_name(dev, dev->name, bpf_get_func_ip(ctx));
	return 0;
}

SEC("kprobe/ib_device_rename")
int BPF_KPROBE(kprobe_dev_rename, struct ib_device *dev, const char *name)
{
	dev_name(dev, name, kprobe_ip(ctx));
	return 0;
}

#endif
