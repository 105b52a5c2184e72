package main

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestSentinelURL(t *testing.T) {
	cases := []struct {
		url     string
		want    *redis.FailoverOptions // nil: refused
		tls     bool
		problem string
	}{
		{url: "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster",
			want: &redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"127.0.0.1:26379", "127.0.0.1:26380"}}},
		{url: "redis+sentinel://:s3cret@s1:26379,s2:26379,s3:26379/cache/2?sentinel_password=sp",
			want: &redis.FailoverOptions{MasterName: "cache", SentinelAddrs: []string{"s1:26379", "s2:26379", "s3:26379"},
				Password: "s3cret", SentinelPassword: "sp", DB: 2}},
		{url: "rediss+sentinel://app:p%40ss@s1:26379/cache/0",
			want: &redis.FailoverOptions{MasterName: "cache", SentinelAddrs: []string{"s1:26379"}, Username: "app", Password: "p@ss"}, tls: true},
		{url: "redis+sentinel://:p@ss/w@s1:26379/my%20master",
			want: &redis.FailoverOptions{MasterName: "my master", SentinelAddrs: []string{"s1:26379"}, Password: "p@ss/w"}},
		{url: "redis+sentinel://:s3cret@s1/cache", problem: "host:port"},
		{url: "redis+sentinel://:s3cret@s1:abc/cache", problem: "host:port"},
		{url: "redis+sentinel://:s3cret@:26379/cache", problem: "host:port"},
		{url: "redis+sentinel://:s3cret@s1:26379/cache#x", problem: "fragment"},
		{url: "redis+sentinel://:s3cret@s1:26379/cache?sentinel_password=a&sentinel_password=b", problem: "twice"},
		{url: "redis+sentinel://:s3cret@s1:26379/", problem: "master's name is missing"},
		{url: "redis+sentinel://:s3cret@s1:26379/cache/two", problem: "must be a number"},
		{url: "redis+sentinel://:s3cret@s1:26379/cache?master=x", problem: `unknown parameter "master"`},
	}
	for _, c := range cases {
		got, err := sentinelOptions(c.url)
		if c.want == nil {
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Errorf("%s: %v, want an error about %q", c.url, err, c.problem)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: the error shows the password: %v", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if got.MasterName != c.want.MasterName || strings.Join(got.SentinelAddrs, ",") != strings.Join(c.want.SentinelAddrs, ",") ||
			got.Username != c.want.Username || got.Password != c.want.Password || got.SentinelPassword != c.want.SentinelPassword ||
			got.DB != c.want.DB || (got.TLSConfig != nil) != c.tls {
			t.Errorf("%s: %+v, want %+v (TLS %v)", c.url, got, c.want, c.tls)
		}
		if got.ReadTimeout != redisIOTimeout || got.DialTimeout != redisDialTimeout {
			t.Errorf("%s: timeouts %s/%s, want whguard's short ones", c.url, got.DialTimeout, got.ReadTimeout)
		}
	}
}
