package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Format is the body form a sink sends.
type Format string

const (
	// FormatWebhook posts the Event as JSON.
	FormatWebhook Format = "webhook"
	// FormatSlack posts {"text", "blocks"}, as Slack's incoming webhooks
	// (and Mattermost, Rocket.Chat, Teams' Slack-compatible ones) take it.
	FormatSlack Format = "slack"
	// FormatCloudEvents posts a CloudEvents 1.0 event in structured JSON mode.
	FormatCloudEvents Format = "cloudevents"
)

// cloudEventsTypePrefix: a notification of type rollout.promoted is the
// CloudEvent io.rainbow.rollout.promoted.
const cloudEventsTypePrefix = "io.rainbow."

// body is the request body and content type of e in form f.
func body(f Format, e Event) ([]byte, string, error) {
	switch f {
	case FormatWebhook:
		b, err := json.Marshal(e)
		return b, "application/json", err
	case FormatSlack:
		b, err := json.Marshal(slackBody(e))
		return b, "application/json", err
	case FormatCloudEvents:
		b, err := json.Marshal(cloudEvent{
			SpecVersion: "1.0", ID: e.ID, Type: cloudEventsTypePrefix + string(e.Type), Time: e.Time.UTC().Format(time.RFC3339Nano),
			Source:          fmt.Sprintf("/apis/temporal.io/v1alpha1/namespaces/%s/temporalworkerdeployments/%s", e.Namespace, e.Name),
			Subject:         e.BuildID,
			DataContentType: "application/json", Data: e,
		})
		return b, "application/cloudevents+json; charset=utf-8", err
	}
	return nil, "", fmt.Errorf("unknown format %q", f)
}

type cloudEvent struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Time            string `json:"time"`
	Subject         string `json:"subject,omitempty"`
	DataContentType string `json:"datacontenttype"`
	Data            Event  `json:"data"`
}

type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var titles = map[Type]string{
	RolloutStarted:  "rollout started",
	RolloutStep:     "ramp step",
	RolloutPaused:   "rollout paused",
	RolloutAborted:  "rollout aborted",
	RolloutPromoted: "version promoted",
	VersionRetired:  "version retired",
	AnalysisFailed:  "analysis failed",
}

// slackBody: text is what notifications and clients without blocks show.
func slackBody(e Event) slackMessage {
	title := titles[e.Type]
	if title == "" {
		title = string(e.Type)
	}
	head := fmt.Sprintf("%s/%s: %s", e.Namespace, e.Name, title)
	var facts []string
	if e.BuildID != "" {
		facts = append(facts, "version `"+e.BuildID+"`")
	}
	if e.CurrentBuildID != "" {
		facts = append(facts, "current `"+e.CurrentBuildID+"`")
	}
	if e.RampingBuildID != "" {
		facts = append(facts, fmt.Sprintf("ramping `%s` %d%%", e.RampingBuildID, e.RampPercentage))
	}
	facts = append(facts, "reason "+e.Reason)
	return slackMessage{
		Text: head + ": " + e.Message,
		Blocks: []slackBlock{
			{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "*" + head + "*\n" + e.Message}},
			{Type: "context", Elements: []slackText{{Type: "mrkdwn", Text: strings.Join(facts, " · ")}}},
		},
	}
}
