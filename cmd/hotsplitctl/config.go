package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show or change the replicated detector and load config",
		Example: `  hotsplitctl autosplit config get
  hotsplitctl autosplit config set threshold=60000 cooldown=10m`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(a.configGetCmd(), a.configSetCmd())
	return cmd
}

func (a *app) configGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get",
		Short: "Show the config",
		Example: `  hotsplitctl autosplit config get
  hotsplitctl autosplit config get -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.GetConfig(cmd.Context(), &api.GetConfigRequest{Consistency: a.readConsistency()})
			if err != nil {
				return failed("autosplit config get", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if err := configTable(a.out, resp.GetConfig(), nil); err != nil {
				return err
			}
			if info := readInfo(resp.GetRead()); info != "" {
				_, err = fmt.Fprintf(a.out, "(%s)\n", info)
			}
			return err
		},
	}
}

func (a *app) configSetCmd() *cobra.Command {
	var requestID string
	cmd := &cobra.Command{
		Use:   "set FIELD=VALUE...",
		Short: "Change config fields; the others keep their values",
		Long: `Change the named config fields in one replicated entry; the others keep
their values. The cluster validates every value and applies all or nothing.
Changing the config resets the detector's consecutive-over counters; a patch
that leaves the config as it is says "unchanged" and (from cluster version
3) changes nothing, counters included. With --request-id the answer is the
request's first one (it may have run before), shown as an update.

FIELD is a config field by its proto name:
  ` + strings.Join(patchFieldNames(), "\n  ") + `
Fields ending in _ms take milliseconds; each may instead be given without the
_ms suffix as a duration with a unit: cooldown=10m, step=1s, op_ttl=10m,
grace=500ms. Ratios in basis points (_bp): 8000 = 80%.`,
		Example: `  hotsplitctl autosplit config set threshold=60000 cooldown_ms=600000
  hotsplitctl autosplit config set cooldown=10m step=1s op_ttl=10m grace=500ms
  hotsplitctl autosplit config set top_key_share_bp=9000 -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf(cmd, "expects FIELD=VALUE..., got none")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, changed, err := parsePatch(args)
			if err != nil {
				return usageErr(cmd, err)
			}
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			// The config before, to say when the patch changed nothing
			// (the cluster then resets no hysteresis from version 3 on).
			// Only for a request id of this run: a given --request-id may
			// re-send a request that already ran, whose answer is the
			// first run's, so the config before says nothing about it.
			// Without it the answer is shown as a change.
			var before *api.Config
			if !a.json() && requestID == "" {
				if b, err := cl.GetConfig(cmd.Context(), &api.GetConfigRequest{}); err == nil {
					before = b.GetConfig()
				}
			}
			resp, err := cl.SetConfig(cmd.Context(), &api.SetConfigRequest{Patch: patch, RequestId: requestID})
			if err != nil {
				return failedMutation("autosplit config set "+strings.Join(changed, " "), err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if before != nil && proto.Equal(before, resp.GetConfig()) {
				if _, err := fmt.Fprintf(a.out, "config unchanged: %s already in force\n", strings.Join(changed, " ")); err != nil {
					return err
				}
				return configTable(a.out, resp.GetConfig(), nil)
			}
			if _, err := fmt.Fprintf(a.out, "config updated: %s\n", strings.Join(changed, " ")); err != nil {
				return err
			}
			return configTable(a.out, resp.GetConfig(), changed)
		},
	}
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

// patchFieldNames lists the ConfigPatch fields in field-number order.
func patchFieldNames() []string {
	fds := (&api.ConfigPatch{}).ProtoReflect().Descriptor().Fields()
	names := make([]string, fds.Len())
	for i := range fds.Len() {
		names[i] = string(fds.Get(i).Name())
	}
	return names
}

// parsePatch turns FIELD=VALUE arguments into a ConfigPatch. It accepts
// every ConfigPatch field by its proto name, and each *_ms field also by its
// name without the suffix as a Go duration. changed lists the assignments in
// canonical form (field=value), in field-number order.
func parsePatch(args []string) (*api.ConfigPatch, []string, error) {
	patch := &api.ConfigPatch{}
	m := patch.ProtoReflect()
	fds := m.Descriptor().Fields()
	type assignment struct {
		fd         protoreflect.FieldDescriptor
		name, val  string
		asDuration bool
	}
	var (
		todo    []assignment
		unknown []string
		given   = map[protoreflect.Name]string{}
	)
	// Names first, so one run reports every unknown field.
	for _, arg := range args {
		name, val, ok := strings.Cut(arg, "=")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("%q is not FIELD=VALUE", arg)
		}
		fd := fds.ByName(protoreflect.Name(name))
		asDuration := false
		if fd == nil && !strings.HasSuffix(name, "_ms") {
			if fd = fds.ByName(protoreflect.Name(name + "_ms")); fd != nil {
				asDuration = true
			}
		}
		if fd == nil {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		if prev, dup := given[fd.Name()]; dup {
			return nil, nil, fmt.Errorf("%s is given twice (%s and %s)", fd.Name(), prev, arg)
		}
		given[fd.Name()] = arg
		todo = append(todo, assignment{fd, name, val, asDuration})
	}
	if len(unknown) > 0 {
		noun := "field"
		if len(unknown) > 1 {
			noun = "fields"
		}
		return nil, nil, fmt.Errorf("unknown config %s %s; known fields: %s (and cooldown, step, op_ttl, grace as durations)",
			noun, strings.Join(unknown, ", "), strings.Join(patchFieldNames(), ", "))
	}
	for _, a := range todo {
		v, err := parseFieldValue(a.fd, a.name, a.val, a.asDuration)
		if err != nil {
			return nil, nil, err
		}
		m.Set(a.fd, v)
	}
	var changed []string
	for i := range fds.Len() {
		fd := fds.Get(i)
		if m.Has(fd) {
			changed = append(changed, fmt.Sprintf("%s=%v", fd.Name(), m.Get(fd).Interface()))
		}
	}
	return patch, changed, nil
}

func parseFieldValue(fd protoreflect.FieldDescriptor, name, val string, asDuration bool) (protoreflect.Value, error) {
	if fd.Kind() == protoreflect.BoolKind && !asDuration {
		b, err := strconv.ParseBool(val)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("%s=%s: want true or false", name, val)
		}
		return protoreflect.ValueOfBool(b), nil
	}
	bits := 64
	if fd.Kind() == protoreflect.Uint32Kind {
		bits = 32
	} else if fd.Kind() != protoreflect.Uint64Kind {
		return protoreflect.Value{}, fmt.Errorf("%s: field kind %s is not supported by this CLI", name, fd.Kind())
	}
	var n uint64
	if asDuration {
		d, err := time.ParseDuration(val)
		switch {
		case err != nil && strings.Contains(err.Error(), "missing unit"):
			return protoreflect.Value{}, fmt.Errorf("%s=%s: give a unit, e.g. %s=10m (or %s=%s for milliseconds)", name, val, name, fd.Name(), val)
		case err != nil:
			return protoreflect.Value{}, fmt.Errorf("%s=%s: not a duration such as 10m, 1s or 500ms", name, val)
		case d < 0:
			return protoreflect.Value{}, fmt.Errorf("%s=%s: negative", name, val)
		case d%time.Millisecond != 0:
			return protoreflect.Value{}, fmt.Errorf("%s=%s: not a whole number of milliseconds", name, val)
		}
		n = uint64(d / time.Millisecond)
	} else {
		var err error
		n, err = strconv.ParseUint(val, 10, bits)
		if err != nil {
			msg := fmt.Sprintf("%s=%s: want a whole number from 0 to %d", name, val, uint64(1)<<bits-1)
			if strings.HasSuffix(name, "_ms") {
				msg += fmt.Sprintf(" (milliseconds; or write %s=%s for a duration)", strings.TrimSuffix(name, "_ms"), val)
			}
			return protoreflect.Value{}, fmt.Errorf("%s", msg)
		}
	}
	if bits == 32 {
		if n > 1<<32-1 {
			return protoreflect.Value{}, fmt.Errorf("%s=%s: at most %d", name, val, uint64(1)<<32-1)
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	}
	return protoreflect.ValueOfUint64(n), nil
}

// configTable prints every Config field with its value and, where it
// helps, the value in a readable unit. Fields named in changed (as
// field=value) are marked "(changed)".
// firstV2ConfigField is the first Config field of cluster version 2; the
// table leaves such fields out while they are unset.
const firstV2ConfigField = 40

func configTable(w io.Writer, cfg *api.Config, changed []string) error {
	mark := map[string]bool{}
	for _, c := range changed {
		name, _, _ := strings.Cut(c, "=")
		mark[name] = true
	}
	m := cfg.ProtoReflect()
	fds := m.Descriptor().Fields()
	t := newTable(w, "FIELD", "VALUE", "MEANING")
	rows := make([]protoreflect.FieldDescriptor, fds.Len())
	for i := range fds.Len() {
		rows[i] = fds.Get(i)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Number() < rows[j].Number() })
	for _, fd := range rows {
		name := string(fd.Name())
		if fd.Number() >= firstV2ConfigField && !m.Has(fd) {
			continue // a cluster version 2 setting that is not in use
		}
		v := m.Get(fd)
		var value string
		var n uint64
		switch fd.Kind() {
		case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
			n = v.Uint()
			value = strconv.FormatUint(n, 10)
		default:
			value = v.String()
		}
		meaning := ""
		switch {
		case name == "next_step_at_ms":
			meaning = "from " + formatWall(n)
		case name == "floor_follows_threshold":
			meaning = "top_key_absolute_floor is threshold/2 until set"
		case name == "merge_threshold_bp":
			meaning = formatBP(n) + " of the threshold: below it a route is cold"
		case name == "merge_margin_bp":
			meaning = "a merged route starts at least " + formatBP(n) + " of the threshold below it"
		case name == "max_merges_per_cycle" && n == 0:
			meaning = "no automatic merges"
		case strings.HasSuffix(name, "_ms"):
			meaning = formatMs(n)
		case strings.HasSuffix(name, "_bp"):
			meaning = formatBP(n)
		case name == "threshold" || name == "top_key_absolute_floor":
			meaning = "weighted ops/min"
		}
		if mark[name] {
			meaning = strings.TrimSpace(meaning + " (changed)")
		}
		t.row(name, value, meaning)
	}
	return t.flush()
}
