package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/replicago/replica/redisstore"
	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

// addr is the test server: $REPLICA_REDIS_ADDR, or the CI machine's.
func addr() string {
	if a := os.Getenv("REPLICA_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		if os.Getenv("REPLICA_SKIP_SERVICES") != "" {
			t.Skip("REPLICA_SKIP_SERVICES is set: no Redis")
		}
		var b [6]byte
		rand.Read(b[:])
		prefix := "replicatest:" + hex.EncodeToString(b[:]) + ":"
		ctx := context.Background()
		s, err := redisstore.Open(ctx, redisstore.Config{Options: &redis.Options{Addr: addr()}, Prefix: prefix})
		if err != nil {
			t.Fatalf("Redis at %s (start it, or set REPLICA_REDIS_ADDR): %v", addr(), err)
		}
		t.Cleanup(func() {
			c := redis.NewClient(&redis.Options{Addr: addr(), MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
			defer c.Close()
			keys, err := c.Keys(ctx, prefix+"*").Result()
			if err == nil && len(keys) > 0 {
				err = c.Del(ctx, keys...).Err()
			}
			if err != nil {
				t.Errorf("removing test keys: %v", err)
			}
		})
		return s
	})
}
