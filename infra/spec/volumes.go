package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/inventory"
)

// DefaultVolumeName names the one data volume the volume* keys describe when the stack config
// has no dataVolumes list.
const DefaultVolumeName = "data"

// dataVolumeExample is one dataVolumes item, for messages.
const dataVolumeExample = "gp3-1000 type=gp3 size=200 iops=4000 throughput=1000"

// volumeDevices are the device names data volumes are attached at, in list order: AWS
// recommends /dev/sd[f-p] for EBS volumes on Linux. On Nitro instances each shows up as an
// NVMe device whose serial is the volume id, which is how the agent finds it.
var volumeDevices = []string{DataDeviceName, "/dev/sdg", "/dev/sdh", "/dev/sdi", "/dev/sdj", "/dev/sdk",
	"/dev/sdl", "/dev/sdm", "/dev/sdn", "/dev/sdo", "/dev/sdp"}

// MaxDataVolumes is how many data volumes a node may have (one per device name above).
var MaxDataVolumes = len(volumeDevices)

// DataVolume is one data volume every server (and, with clientDataVolume, every client) gets.
type DataVolume struct {
	Name       string // names the mount point and disk.volume in playbooks
	Type       string // gp3 or io2
	Size       int    // GiB
	IOPS       int
	Throughput int    // MiB/s, gp3 only
	Device     string // where it is attached, e.g. /dev/sdg
	// field names the config field a problem about one of its settings is reported under:
	// volumeIops for the default volume, dataVolumes[1].iops for a listed one.
	field func(setting string) string
}

// Field is the config field of one of the volume's settings (type, size, iops, throughput).
func (v DataVolume) Field(setting string) string {
	if v.field == nil {
		return legacyField(setting)
	}
	return v.field(setting)
}

func legacyField(setting string) string {
	switch setting {
	case "iops":
		return "volumeIops"
	case "size", "type", "throughput":
		return "volume" + strings.ToUpper(setting[:1]) + setting[1:]
	}
	return "dataVolumes"
}

// Describe is the volume as the plan prints it: gp3 200 GiB, 4,000 IOPS, 1,000 MiB/s.
func (v DataVolume) Describe() string {
	out := fmt.Sprintf("%s %s GiB, %s IOPS", v.Type, thousands(v.Size), thousands(v.IOPS))
	if v.Type == VolumeGP3 {
		out += fmt.Sprintf(", %s MiB/s", thousands(v.Throughput))
	}
	return out
}

// Inventory is the volume as a node's inventory carries it, with the EBS volume id.
func (v DataVolume) Inventory(volumeID string) inventory.Volume {
	iv := inventory.Volume{Name: v.Name, VolumeID: volumeID, DeviceName: v.Device, Type: v.Type, SizeGiB: v.Size, IOPS: v.IOPS}
	if v.Type == VolumeGP3 {
		iv.ThroughputMiBps = v.Throughput
	}
	return iv
}

// Volumes lists the data volumes of each node that has any, in attachment order: the dataVolumes
// list, or the one volume the volume* keys describe (named DefaultVolumeName) when it is empty.
func (s Spec) Volumes() []DataVolume {
	if len(s.DataVolumes) == 0 {
		return []DataVolume{{Name: DefaultVolumeName, Type: s.VolumeType, Size: s.VolumeSize, IOPS: s.VolumeIOPS,
			Throughput: s.VolumeThroughput, Device: volumeDevices[0]}}
	}
	return s.DataVolumes
}

// legacyVolumeKeys are replaced by dataVolumes; setting one to other than its default as well is
// refused, since it would be silently ignored. (The Pulumi engine hands the program every key's
// default from Pulumi.yaml, so a value equal to the default says nothing.)
var legacyVolumeKeys = []string{"volumeType", "volumeSize", "volumeIops", "volumeThroughput"}

// parseDataVolumes reads the dataVolumes list: each item a string "NAME type=gp3 size=200
// iops=4000 throughput=1000" (io2: no throughput), every setting required, so that no volume
// takes a figure nobody wrote down.
func parseDataVolumes(raw map[string]string) ([]DataVolume, Problems) {
	v, ok := raw["dataVolumes"]
	if !ok || strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var items []string
	if err := json.Unmarshal([]byte(v), &items); err != nil {
		return nil, Problems{{Field: "dataVolumes", Value: v, Allowed: fmt.Sprintf("a list of strings, e.g. [%q]", dataVolumeExample)}}
	}
	if len(items) == 0 {
		return nil, nil
	}
	var probs Problems
	for _, k := range legacyVolumeKeys {
		key, _ := KeyByName(k)
		if val, set := raw[k]; set && val != fmt.Sprint(key.Default) {
			probs = append(probs, Problem{Field: k, Value: raw[k], Allowed: "unset when dataVolumes is given",
				Reason: "dataVolumes lists every data volume with its own type, size, IOPS and throughput; remove " + k})
		}
	}
	syntax := `"NAME type=gp3 size=GiB iops=N throughput=MiB/s" (io2: no throughput), e.g. "` + dataVolumeExample + `"`
	if len(items) > MaxDataVolumes {
		probs = append(probs, Problem{Field: "dataVolumes", Value: strconv.Itoa(len(items)) + " volumes",
			Allowed: fmt.Sprintf("at most %d (one per device name %s..%s)", MaxDataVolumes, volumeDevices[0], volumeDevices[MaxDataVolumes-1])})
		items = items[:MaxDataVolumes]
	}
	seen := map[string]int{}
	var out []DataVolume
	for i, item := range items {
		i := i
		at := fmt.Sprintf("dataVolumes[%d]", i)
		fields := strings.Fields(item)
		if len(fields) == 0 {
			probs = append(probs, Problem{Field: at, Value: strconv.Quote(item), Allowed: syntax})
			continue
		}
		d := DataVolume{Name: fields[0], Device: volumeDevices[i],
			field: func(setting string) string { return at + "." + setting }}
		if err := inventory.CheckName(at+" name", d.Name); err != nil || strings.Contains(d.Name, "=") {
			probs = append(probs, Problem{Field: at, Value: strconv.Quote(d.Name), Allowed: "a volume name first (" + inventory.NameGrammar + "), then " + syntax,
				Reason: "the name becomes the volume's mount point and what disk.volume in a playbook names"})
			continue
		}
		if j, dup := seen[d.Name]; dup {
			probs = append(probs, Problem{Field: at, Value: strconv.Quote(d.Name), Allowed: "a name no other volume has",
				Reason: fmt.Sprintf("dataVolumes[%d] is named %s too", j, d.Name)})
		}
		seen[d.Name] = i
		given := map[string]bool{}
		for _, kv := range fields[1:] {
			k, val, ok := strings.Cut(kv, "=")
			var dst *int
			switch k {
			case "type", "size", "iops", "throughput":
				if ok && given[k] {
					// Last-wins would build a volume nobody reads off the line.
					probs = append(probs, Problem{Field: at + "." + k, Value: strconv.Quote(kv), Allowed: "each setting once (" + syntax + ")",
						Reason: k + "= is given twice in " + strconv.Quote(item)})
					continue
				}
			}
			switch k {
			case "type":
				d.Type, given[k] = val, true
				continue
			case "size":
				dst = &d.Size
			case "iops":
				dst = &d.IOPS
			case "throughput":
				dst = &d.Throughput
			}
			if !ok || dst == nil {
				probs = append(probs, Problem{Field: at, Value: strconv.Quote(kv), Allowed: "type=, size=, iops= or throughput= (" + syntax + ")"})
				continue
			}
			num, unit := splitUnit(val)
			n, err := strconv.Atoi(num)
			// A value refused here is given, if wrongly: it is not also reported missing.
			if err != nil {
				probs = append(probs, Problem{Field: at + "." + k, Value: strconv.Quote(val), Allowed: "a whole number" + unitAllowed(k)})
				given[k] = true
				continue
			}
			if unit != "" && unit != volumeUnits[k] {
				probs = append(probs, Problem{Field: at + "." + k, Value: strconv.Quote(val), Allowed: "a whole number" + unitAllowed(k),
					Reason: fmt.Sprintf("%s is not a unit of %s", unit, k)})
				given[k] = true
				continue
			}
			*dst, given[k] = n, true
		}
		need := []string{"type", "size", "iops"}
		if d.Type == VolumeGP3 {
			need = append(need, "throughput")
		}
		for _, k := range need {
			if !given[k] {
				probs = append(probs, Problem{Field: at + "." + k, Value: "(missing)", Allowed: syntax})
			}
		}
		if d.Type == VolumeIO2 && given["throughput"] {
			probs = append(probs, Problem{Field: at + ".throughput", Value: strconv.Itoa(d.Throughput), Allowed: "no throughput for io2",
				Reason: "io2 provisions IOPS only"})
		}
		out = append(out, d)
	}
	return out, probs
}

// volumeUnits are the one unit each numeric setting of a dataVolumes item may be written with
// (EBS's own: size in GiB, throughput in MiB/s); iops takes none.
var volumeUnits = map[string]string{"size": "GiB", "throughput": "MiB/s", "iops": ""}

func unitAllowed(k string) string {
	if u := volumeUnits[k]; u != "" {
		return fmt.Sprintf(", optionally followed by %s (e.g. %s=200 or %s=200%s)", u, k, k, u)
	}
	return ", without a unit"
}

// splitUnit splits "200GiB" into "200" and "GiB" (a sign or digits first, then the rest).
func splitUnit(v string) (num, unit string) {
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || i == 0 && (v[i] == '-' || v[i] == '+')) {
		i++
	}
	return v[:i], v[i:]
}

// checkVolume applies the rules of the volume's type to one volume.
func checkVolume(v DataVolume, errf func(field, value, allowed, reason string)) {
	f := v.Field
	switch v.Type {
	case VolumeGP3:
		if v.Size < GP3MinSize || v.Size > GP3MaxSize {
			errf(f("size"), thousands(v.Size)+" GiB", fmt.Sprintf("%s-%s GiB for gp3", thousands(GP3MinSize), thousands(GP3MaxSize)), "")
		}
		if v.IOPS < GP3MinIOPS || v.IOPS > GP3MaxIOPS {
			errf(f("iops"), thousands(v.IOPS), fmt.Sprintf("%s-%s for gp3", thousands(GP3MinIOPS), thousands(GP3MaxIOPS)), "")
		} else if v.IOPS > GP3MinIOPS && v.Size >= GP3MinSize && v.IOPS > GP3MaxIOPSPerGiB*v.Size {
			errf(f("iops"), thousands(v.IOPS), fmt.Sprintf("<= %s on %s GiB (500 IOPS per GiB for gp3)",
				thousands(GP3MaxIOPSPerGiB*v.Size), thousands(v.Size)), fmt.Sprintf("raise %s or lower %s", f("size"), f("iops")))
		}
		switch {
		case v.Throughput < GP3MinThroughput:
			errf(f("throughput"), thousands(v.Throughput)+" MiB/s", "125-1,000 MiB/s for gp3", "")
		case v.Throughput > GP3MaxThroughput:
			errf(f("throughput"), thousands(v.Throughput)+" MiB/s", "125-1,000 MiB/s for gp3", throughputCapReason)
		case float64(v.Throughput) > GP3MaxThroughputPerIOPS*float64(v.IOPS):
			need := v.Throughput * 4 // 0.25 MiB/s per IOPS
			errf(f("throughput"), thousands(v.Throughput)+" MiB/s",
				fmt.Sprintf("<= %s MiB/s with %s %s (0.25 MiB/s per IOPS for gp3)", units.Group(strconv.FormatFloat(GP3MaxThroughputPerIOPS*float64(v.IOPS), 'f', -1, 64)), f("iops"), thousands(v.IOPS)),
				fmt.Sprintf("raise %s to at least %s", f("iops"), thousands(need)))
		}
	case VolumeIO2:
		if v.Size < IO2MinSize || v.Size > IO2MaxSize {
			errf(f("size"), thousands(v.Size)+" GiB", fmt.Sprintf("%s-%s GiB for io2", thousands(IO2MinSize), thousands(IO2MaxSize)), "")
		}
		if v.IOPS < IO2MinIOPS || v.IOPS > IO2MaxIOPS {
			errf(f("iops"), thousands(v.IOPS), fmt.Sprintf("%s-%s for io2", thousands(IO2MinIOPS), thousands(IO2MaxIOPS)), "")
		} else if v.Size >= 1 && v.IOPS > IO2MaxIOPSPerGiB*v.Size {
			errf(f("iops"), thousands(v.IOPS), fmt.Sprintf("<= %s on %s GiB (1,000 IOPS per GiB for io2)",
				thousands(IO2MaxIOPSPerGiB*v.Size), thousands(v.Size)), fmt.Sprintf("raise %s or lower %s", f("size"), f("iops")))
		}
	default:
		errf(f("type"), strconv.Quote(v.Type), "gp3 or io2", "")
	}
}

// checkVolumeSet holds the volumes of one node against its instance's EBS bandwidth: the sum
// of their provisioned MB/s (gp3; io2 provisions no throughput) and IOPS, since every volume of
// an instance shares its EBS link. A problem names the field, the sum and the instance's limit;
// above the maximum it is an error, above the baseline a warning (the instance holds its maximum
// only 30 minutes per 24 hours). With one volume the field is that volume's own.
func checkVolumeSet(vols []DataVolume, roleField string, it InstanceType, errf, warnf func(field, value, allowed, reason string)) {
	var mib, iops int
	var mibParts, iopsParts []string
	for _, v := range vols {
		if v.Type != VolumeGP3 && v.Type != VolumeIO2 {
			return // reported on its own; a sum with an unknown type says nothing
		}
		if v.Type == VolumeGP3 {
			mib += v.Throughput
			mibParts = append(mibParts, fmt.Sprintf("%s %s", v.Name, thousands(v.Throughput)))
		}
		iops += v.IOPS
		iopsParts = append(iopsParts, fmt.Sprintf("%s %s", v.Name, thousands(v.IOPS)))
	}
	mibField, iopsField, sum := "dataVolumes", "dataVolumes", "the sum of "
	if len(vols) == 1 {
		mibField, iopsField, sum = vols[0].Field("throughput"), vols[0].Field("iops"), ""
	}
	mbps := float64(mib) * mibToMB
	if mib > 0 {
		val := fmt.Sprintf("%s MiB/s (%s MB/s)", thousands(mib), thousands(int(mbps+0.5)))
		if len(vols) > 1 {
			val = fmt.Sprintf("%sthroughput %s MiB/s (%s MiB/s, %s MB/s)", sum, strings.Join(mibParts, " + "), thousands(mib), thousands(int(mbps+0.5)))
		}
		switch {
		case mbps > it.EBSMaxMBps:
			errf(mibField, val, fmt.Sprintf("<= %s MB/s on %s (its EBS maximum)", fmtMB(it.EBSMaxMBps), it.Name),
				fmt.Sprintf("%s is %s; pick a larger size or provision less throughput", roleField, it.Name))
		case mbps > it.EBSBaselineMBps:
			warnf(mibField, val, fmt.Sprintf("<= %s MB/s sustained on %s (its EBS baseline)", fmtMB(it.EBSBaselineMBps), it.Name),
				fmt.Sprintf("%s is %s: it bursts to %s MB/s for 30 minutes per 24 hours, then a run sees the baseline", roleField, it.Name, fmtMB(it.EBSMaxMBps)))
		}
	}
	val := thousands(iops)
	if len(vols) > 1 {
		val = fmt.Sprintf("%sIOPS %s (%s)", sum, strings.Join(iopsParts, " + "), thousands(iops))
	}
	switch {
	case iops > it.EBSMaxIOPS:
		errf(iopsField, val, fmt.Sprintf("<= %s on %s (its EBS maximum IOPS)", thousands(it.EBSMaxIOPS), it.Name),
			fmt.Sprintf("%s is %s", roleField, it.Name))
	case iops > it.EBSBaselineIOPS:
		warnf(iopsField, val, fmt.Sprintf("<= %s sustained on %s (its EBS baseline IOPS)", thousands(it.EBSBaselineIOPS), it.Name),
			fmt.Sprintf("%s is %s: it bursts to %s IOPS for 30 minutes per 24 hours", roleField, it.Name, thousands(it.EBSMaxIOPS)))
	}
}
