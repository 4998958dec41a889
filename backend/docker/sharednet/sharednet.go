// Package sharednet is the Docker backend's shared network: the long-lived
// bridge network, sharded, that sandboxes without services join instead of a
// network of their own.
package sharednet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// A sandbox without services (and so with no one to reach by name) joins one
// long-lived bridge network per Engine instead of a network of its own: creating
// and removing a network costs more than a whole `docker run`. Inter-container
// communication is disabled on it (com.docker.network.bridge.enable_icc=false), so
// sandboxes on it cannot reach each other, only the outside. It is made on first
// use, labelled as shared (never with a sandbox ID, so no sandbox's removal takes
// it), and left in place; `airlock prune` may remove it when nothing uses it.
// Podman cannot keep sandboxes on its networks apart: sandbox.network =
// "bridge" is refused there (the Docker backend checks first).
//
// A bridge holds at most 1023 ports, so the shared network is sharded: once
// airlock-shared holds sharedMax sandboxes, the next joins airlock-shared-2,
// and so on, each made on demand like the first and removed once its last
// sandbox is (the first stays).

const (
	// SharedNetwork is the name of the shared network on every Engine: its
	// first shard (the next are SharedNetwork-2, -3, …).
	SharedNetwork = "airlock-shared"
	// LabelShared marks the shared network and its shards.
	LabelShared = "dev.airlock.shared"
	// LabelShard names, on a sandbox's primary, the shard of the shared
	// network it joined.
	LabelShard = "dev.airlock.shared-network"
	// DefaultSharedNetworkMax is how many sandboxes one shard holds unless
	// the runtime says otherwise (runtime.shared_network_max): a Linux bridge
	// takes at most 1023 ports, and an egress proxy or a service joins a
	// network of its own, not a shard.
	DefaultSharedNetworkMax = 1000
)

// ShardName is the name of shard n (1, 2, …) of the shared network.
func ShardName(n int) string {
	if n <= 1 {
		return SharedNetwork
	}
	return SharedNetwork + "-" + strconv.Itoa(n)
}

// State remembers the shards of the shared network on one Engine, and the
// sandboxes being made on each (counted until they exist); its zero value is
// ready. A runtime keeps one for its Engine.
type State struct {
	mu      sync.Mutex
	ids     map[string]string // shard name → network ID
	pending map[string]int
	counted map[string]shardCount // shard name → its members when last listed, and made here since
}

// shardCount is what Pick knows of a shard's members without asking the
// Engine: the containers labelled with it when it last listed them, plus
// those made here since (removals are not subtracted: it errs high).
type shardCount struct {
	n  int
	at time.Time
}

const (
	// ShardRecount is how long a shard's count stands before Pick lists
	// its containers again: under a burst, listing hundreds of containers for
	// every sandbox cost the Engine and the daemon more than the sandbox.
	ShardRecount = 5 * time.Second
	// shardMargin: a shard whose count comes within this many of the limit is
	// listed for every sandbox (other daemons on the Engine may have filled it
	// meanwhile; a bridge takes 1023 ports, the default limit is 1000). A limit
	// of shardMargin or less is always listed.
	shardMargin = 50
)

// Shards are the shards of the shared network on an Engine: the Engine, how
// many sandboxes a shard holds (Max; 0: DefaultSharedNetworkMax), and what is
// known of them (State).
type Shards struct {
	Engine client.APIClient
	Max    int
	State  *State
}

func failed(format string, args ...any) error {
	return &backend.Error{Code: 125, Err: fmt.Errorf(format, args...)}
}

// max is how many sandboxes a shard holds.
func (s *Shards) max() int {
	if s.Max > 0 {
		return s.Max
	}
	return DefaultSharedNetworkMax
}

// Pick chooses the shard a new sandbox joins: the first whose sandboxes
// (every container labelled with it, running or not, of any daemon on the
// Engine, and those this runtime is making) are fewer than Max, made
// when missing. The Engine's count is listed again after ShardRecount, or
// for every sandbox once within shardMargin of the limit. done ends the reservation once the sandbox's container exists
// (or was not made).
func (s *Shards) Pick(ctx context.Context) (name, id string, done func(), err error) {
	s.State.mu.Lock()
	defer s.State.mu.Unlock()
	for n := 1; ; n++ {
		name := ShardName(n)
		c, ok := s.State.counted[name]
		if !ok || time.Since(c.at) >= ShardRecount || c.n+s.State.pending[name] >= s.max()-shardMargin {
			members, err := s.members(ctx, name)
			if err != nil {
				return "", "", nil, err
			}
			c = shardCount{n: members, at: time.Now()}
			if s.State.counted == nil {
				s.State.counted = map[string]shardCount{}
			}
			s.State.counted[name] = c
		}
		members := c.n
		if members+s.State.pending[name] >= s.max() {
			continue
		}
		id, err := s.locked(ctx, name, false)
		if err != nil {
			return "", "", nil, err
		}
		if s.State.pending == nil {
			s.State.pending = map[string]int{}
		}
		s.State.pending[name]++
		var once sync.Once
		return name, id, func() {
			once.Do(func() {
				s.State.mu.Lock()
				defer s.State.mu.Unlock()
				s.State.pending[name]--
				if c, ok := s.State.counted[name]; ok {
					c.n++ // made (or not: erring high)
					s.State.counted[name] = c
				}
			})
		}, nil
	}
}

// members counts the containers labelled with shard name.
func (s *Shards) members(ctx context.Context, name string) (int, error) {
	list, err := s.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelShard+"="+name))})
	if err != nil {
		return 0, failed("cannot list the sandboxes on network %s: %v", name, err)
	}
	return len(list), nil
}

// Network returns the ID of shard name, creating it when missing
// (again, with recheck, when it disappeared). Sandboxes join it by ID: two
// processes making it at once can leave two networks of that name (Engine 20.10's
// duplicate check is not atomic), and a name that matches two is ambiguous.
func (s *Shards) Network(ctx context.Context, name string, recheck bool) (string, error) {
	s.State.mu.Lock()
	defer s.State.mu.Unlock()
	return s.locked(ctx, name, recheck)
}

func (s *Shards) locked(ctx context.Context, name string, recheck bool) (string, error) {
	if id := s.State.ids[name]; id != "" && !recheck {
		return id, nil
	}
	id, err := s.find(ctx, name)
	if err != nil {
		return "", err
	}
	if id == "" {
		_, cerr := s.Engine.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:  "bridge",
			Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
			Labels:  map[string]string{LabelShared: "true"},
		})
		// Another process may have made it meanwhile: look again either way.
		if id, err = s.find(ctx, name); err != nil {
			return "", err
		}
		if id == "" {
			return "", failed("cannot create network %s: %v", name, cerr)
		}
	}
	if s.State.ids == nil {
		s.State.ids = map[string]string{}
	}
	s.State.ids[name] = id
	return id, nil
}

// Leave removes shard name, other than the first, once no sandbox is on
// it and none is being made on it here (the Engine refuses while a running
// container uses it; a sandbox another process makes on it at that moment
// finds it gone when it starts, and makes it again: startShared).
func (s *Shards) Leave(ctx context.Context, name string) {
	if name == "" || name == SharedNetwork {
		return
	}
	s.State.mu.Lock()
	defer s.State.mu.Unlock()
	if s.State.pending[name] > 0 {
		return
	}
	if n, err := s.members(ctx, name); err != nil || n > 0 {
		return
	}
	id, err := s.find(ctx, name)
	if err != nil || id == "" {
		return
	}
	if s.Engine.NetworkRemove(ctx, id) == nil {
		delete(s.State.ids, name)
		delete(s.State.counted, name)
	}
}

// find returns the ID of the network called name ("" when there is
// none). When there are several, it is the oldest (every process picks the same
// one), and the others that airlock made are removed where no container uses them
// (the Engine refuses to remove a network in use; a sandbox being created on one
// finds it gone and asks again).
func (s *Shards) find(ctx context.Context, name string) (string, error) {
	list, err := s.Engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return "", failed("cannot list networks named %s: %v", name, err)
	}
	list = slices.DeleteFunc(list, func(n network.Summary) bool { return n.Name != name })
	if len(list) == 0 {
		return "", nil
	}
	slices.SortFunc(list, func(a, b network.Summary) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, n := range list[1:] {
		if n.Labels[LabelShared] == "true" {
			_ = s.Engine.NetworkRemove(ctx, n.ID)
		}
	}
	return list[0].ID, nil
}
