package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// errEtcdUnreachable: no etcd endpoint of --etcd answered within
// etcdDialTimeout.
var errEtcdUnreachable = errors.New("etcd did not answer")

// checkEtcd asks etcd for the cluster's keys once, within etcdDialTimeout,
// before the member joins: protoactor's etcd provider waits for an etcd
// that does not answer without end and without a word.
func checkEtcd(ec clientv3.Config) error {
	ec.Logger = zap.NewNop() // the error below says it, in the member's words
	cli, err := clientv3.New(ec)
	if err != nil {
		return fmt.Errorf("--etcd %s: %w", strings.Join(ec.Endpoints, ","), err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, etcdBaseKey, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("--etcd %s: %w within %s (is etcd running there, and does it take this member's certificate?): %v",
			strings.Join(ec.Endpoints, ","), errEtcdUnreachable, etcdDialTimeout, err)
	}
	return nil
}
