//go:build linux

package loader

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/openoxide/oxsupervise/loader/internal/objversion"
)

// TestEmbeddedObjects checks, on any kernel, that the committed BPF objects
// parse and contain what the loaders look up by name.
func TestEmbeddedObjects(t *testing.T) {
	probe, err := loadProbe()
	if err != nil {
		t.Fatalf("parse probe object: %v", err)
	}
	fs, err := loadFs()
	if err != nil {
		t.Fatalf("parse filesystem object: %v", err)
	}
	self, err := loadSelf()
	if err != nil {
		t.Fatalf("parse self-protection object: %v", err)
	}
	netfamily, err := loadNetfamily()
	if err != nil {
		t.Fatalf("parse socket family object: %v", err)
	}
	unixPeer, err := loadUnix()
	if err != nil {
		t.Fatalf("parse abstract unix socket object: %v", err)
	}
	tests := []struct {
		name  string
		spec  *ebpf.CollectionSpec
		progs map[string]string // program name -> ELF section
		maps  []string
	}{
		{"probe", probe, map[string]string{probeProgProbeLsmFileOpen: "lsm/file_open", probeProgProbeConnect4: "cgroup/connect4"}, nil},
		// What LoadFS looks up by name; every BPF-LSM object shares the
		// session map and the event maps.
		{"filesystem", fs, map[string]string{
			fsProgFsInodeSetattr: "lsm/inode_setattr", fsProgFsInodeSetattrIdmap: "lsm/inode_setattr", fsProgFsFileTruncate: "lsm/file_truncate",
		}, []string{fsSessionsMap, "fs_anchors", "fs_names", "fs_glob_scopes", eventRingMap, eventLostMap, eventFloodMap}},
		{"self-protection", self, map[string]string{
			selfProgSelfBpf: "lsm/bpf", selfProgSelfPtraceAccessCheck: "lsm/ptrace_access_check", selfProgSelfTaskKill: "lsm/task_kill",
			selfProgSelfFileIoctl: "lsm/file_ioctl", selfProgSelfKernelModuleRequest: "lsm/kernel_module_request",
			selfProgSelfKernelReadFile: "lsm/kernel_read_file", selfProgSelfKernelLoadData: "lsm/kernel_load_data",
			selfProgSelfSbMount: "lsm/sb_mount", selfProgSelfMoveMount: "lsm/move_mount", selfProgSelfSbUmount: "lsm/sb_umount",
			selfProgSelfSbPivotroot: "lsm/sb_pivotroot", selfProgSelfTaskAlloc: "lsm/task_alloc",
		}, []string{fsSessionsMap, eventRingMap, eventLostMap, eventFloodMap}},
		{"socket family", netfamily, map[string]string{netfamilyProgNetfamilySocketCreate: "lsm/socket_create"},
			[]string{fsSessionsMap, eventRingMap, eventLostMap, eventFloodMap}},
		{"abstract unix socket", unixPeer, map[string]string{
			unixProgUnixStreamConnect: "lsm/unix_stream_connect", unixProgUnixMaySend: "lsm/unix_may_send",
		}, []string{fsSessionsMap, eventRingMap, eventLostMap, eventFloodMap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, section := range tt.progs {
				p, ok := tt.spec.Programs[name]
				if !ok {
					t.Fatalf("program %s missing", name)
				}
				if p.SectionName != section {
					t.Errorf("program %s in section %q, want %q", name, p.SectionName, section)
				}
			}
			for _, m := range tt.maps {
				if _, ok := tt.spec.Maps[m]; !ok {
					t.Errorf("map %s missing", m)
				}
			}
		})
	}
}

// ObjectsVersion names the objects this binary embeds: the digest `make
// generate` wrote (objversion_bpfel.go) is the one of the BPF-LSM, network and
// read-only view objects as embedded, and any change of one of them
// changes it.
func TestObjectsVersionNamesTheEmbeddedObjects(t *testing.T) {
	objects := [][]byte{_FsBytes, _SelfBytes, _NetfamilyBytes, _UnixBytes, _NetBytes, _RoviewBytes}
	if got := objversion.Digest(objects...); got != objectsDigest {
		t.Fatalf("objversion_bpfel.go says %s, the embedded objects digest to %s: run make generate", objectsDigest, got)
	}
	if want := "v3-" + objectsDigest; ObjectsVersion() != want {
		t.Errorf("ObjectsVersion() = %s, want %s", ObjectsVersion(), want)
	}
	for i := range objects {
		changed := slices.Clone(objects)
		changed[i] = append(slices.Clone(objects[i]), 0)
		if objversion.Digest(changed...) == objectsDigest {
			t.Errorf("a byte more in object %d leaves the digest %s", i, objectsDigest)
		}
	}
}
