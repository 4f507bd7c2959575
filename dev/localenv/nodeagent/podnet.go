package nodeagent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// Pods share the node's network namespace, but each gets an address of its
// own, so that two pods can serve the same port when they bind their pod IP,
// probes and Services reach the right pod, and EndpointSlices (which refuse
// loopback addresses) can list them. The agent adds one block of
// podNetwork to the loopback interface: a prefix on lo makes every address
// in it local, so any of them can be bound without further setup. Each
// agent takes a block of its own (tests run several environments at once)
// and removes it when it stops.
var podNetwork = netip.MustParsePrefix("198.18.0.0/15") // RFC 2544, reserved for benchmarks: on no real network

const podBlockBits = 20 // 4094 pods per agent, 32 blocks in podNetwork

// podIPs hands out the addresses of one block.
type podIPs struct {
	mu     sync.Mutex
	block  netip.Prefix // zero: no block, every pod gets localIP
	next   netip.Addr
	inUse  map[netip.Addr]string // address -> pod key
	remove func() error
}

// setupPodNetwork adds a free block to lo; without the permission to, pods
// share 127.0.0.1 as before.
func setupPodNetwork() (*podIPs, error) {
	ips := &podIPs{inUse: map[netip.Addr]string{}}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return ips, err
	}
	blocks := 1 << (podBlockBits - podNetwork.Bits())
	start := rand.IntN(blocks)
	var lastErr error
	for i := range blocks {
		n := (start + i) % blocks
		base := podNetwork.Addr().As4()
		v := binary.BigEndian.Uint32(base[:]) + uint32(n)<<(32-podBlockBits)
		binary.BigEndian.PutUint32(base[:], v)
		block := netip.PrefixFrom(netip.AddrFrom4(base), podBlockBits)
		gw := block.Addr().Next()
		err := addrChange(syscall.RTM_NEWADDR, syscall.NLM_F_CREATE|syscall.NLM_F_EXCL, lo.Index, gw, podBlockBits)
		if errors.Is(err, syscall.EEXIST) {
			continue // another environment's block
		}
		if err != nil {
			lastErr = err
			break
		}
		ips.block, ips.next = block, gw.Next()
		ips.remove = func() error { return addrChange(syscall.RTM_DELADDR, 0, lo.Index, gw, podBlockBits) }
		return ips, nil
	}
	if lastErr == nil {
		lastErr = errors.New("every block is taken")
	}
	return ips, fmt.Errorf("adding a block of %s to lo: %w", podNetwork, lastErr)
}

// gateway is the block's first address, the agent's own on the pod
// network; false without a block.
func (p *podIPs) gateway() (netip.Addr, bool) {
	if p == nil || !p.block.IsValid() {
		return netip.Addr{}, false
	}
	return p.block.Addr().Next(), true
}

// allocate returns a free address for key, preferring want (the pod's IP
// from before an agent restart).
func (p *podIPs) allocate(key, want string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.block.IsValid() {
		return localIP
	}
	if a, err := netip.ParseAddr(want); err == nil && p.usable(a) {
		p.inUse[a] = key
		return a.String()
	}
	for range 1 << (32 - podBlockBits) {
		a := p.next
		p.next = p.next.Next()
		if !p.block.Contains(p.next) {
			p.next = p.block.Addr().Next().Next()
		}
		if p.usable(a) {
			p.inUse[a] = key
			return a.String()
		}
	}
	return localIP // block exhausted: share the node's address
}

func (p *podIPs) usable(a netip.Addr) bool {
	if !p.block.Contains(a) || a == p.block.Addr() || a == p.block.Addr().Next() {
		return false
	}
	last := a.Next()
	if !p.block.Contains(last) { // broadcast address
		return false
	}
	_, taken := p.inUse[a]
	return !taken
}

func (p *podIPs) release(ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	p.mu.Lock()
	delete(p.inUse, a)
	p.mu.Unlock()
}

// close removes the block from lo.
func (p *podIPs) close() error {
	if p.remove == nil {
		return nil
	}
	return p.remove()
}

// addrChange sends one RTM_NEWADDR or RTM_DELADDR for addr/bits on the
// interface and waits for the kernel's answer.
func addrChange(msgType uint16, flags uint16, ifIndex int, addr netip.Addr, bits int) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	ip := addr.As4()
	attr := func(typ uint16, data []byte) []byte {
		b := make([]byte, syscall.SizeofRtAttr, syscall.SizeofRtAttr+len(data)+3)
		binary.NativeEndian.PutUint16(b[0:2], uint16(syscall.SizeofRtAttr+len(data)))
		binary.NativeEndian.PutUint16(b[2:4], typ)
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	body := make([]byte, syscall.SizeofIfAddrmsg)
	body[0] = syscall.AF_INET
	body[1] = byte(bits)
	body[3] = syscall.RT_SCOPE_HOST
	binary.NativeEndian.PutUint32(body[4:8], uint32(ifIndex))
	body = append(body, attr(syscall.IFA_LOCAL, ip[:])...)
	body = append(body, attr(syscall.IFA_ADDRESS, ip[:])...)
	msg := make([]byte, syscall.NLMSG_HDRLEN, syscall.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(syscall.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:6], msgType)
	binary.NativeEndian.PutUint16(msg[6:8], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:12], 1)
	msg = append(msg, body...)
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data[0:4])); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
	return errors.New("no answer from netlink")
}
