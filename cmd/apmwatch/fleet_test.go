package main

import (
	"strings"
	"testing"
)

// Wrong fleet and publish options are one-line usage errors (exit 2),
// before anything is started.
func TestFleetAndPublishUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"audit", "--publish", "localhost:4222", "--publish-queue", "/tmp/q"},
		{"audit", "--publish", "nats://127.0.0.1:1"},
		{"audit", "--publish-queue", "/tmp/q"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--publish-queue-max-bytes", "1000"},
		{"audit", "--publish", "nats://127.0.0.1:1", "--publish-queue", "/tmp/q", "--nats-tls-cert", "c.pem"},
		{"fleet", "--instances", "0"},
		{"fleet", "--instance", "2", "--instances", "2"},
		{"fleet", "--nats", "127.0.0.1:4222"},
		{"fleet", "--rearm-deadline", "0s", "--store", "/tmp/s"},
		{"fleet", "status", "--nats", "nowhere"},
		{"fleet", "status", "-o", "yaml"},
		{"postmortem", "--nats", "nats://127.0.0.1:1", "f.rec"},
		{"postmortem", "--nats", "nats://127.0.0.1:1"},
		{"postmortem", "--nats", "nats://127.0.0.1:1", "--since", "yesterday"},
	} {
		_, _, err := runErr(args...)
		if err == nil || exitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v (exit %d), want a one-line usage error", args, err, exitCode(err))
		}
	}
}

// A NATS nobody serves is an error (exit 1), not a hang.
func TestFleetStatusWithoutNATSFails(t *testing.T) {
	_, _, err := runErr("fleet", "status", "--nats", "nats://127.0.0.1:1")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("%v (exit %d)", err, exitCode(err))
	}
}
