package mqtttest

import (
	"context"
	"errors"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

func TestPercentileAndSummarise(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	s := Summarise(lat, 2*time.Second)
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond || s.PerSecond != 50 {
		t.Fatalf("Summarise = %+v", s)
	}
	if lat[0] != 100*time.Millisecond {
		t.Fatal("Summarise sorted its input")
	}
	if got := Percentile(nil, 0.99); got != 0 {
		t.Fatalf("Percentile of nothing = %v", got)
	}
	if got := Summarise(nil, time.Second); got.N != 0 || got.PerSecond != 0 {
		t.Fatalf("Summarise of nothing = %+v", got)
	}
}

func TestMeasurePublishStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	s, err := MeasurePublish(context.Background(), 10, func(_ context.Context, i int) error {
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || s.N != 3 {
		t.Fatalf("MeasurePublish = %+v, %v", s, err)
	}
}

func TestInProcessBrokerDelivers(t *testing.T) {
	b := StartInProcess(t, "127.0.0.1:0")
	got := make(chan string, 1)
	b.Subscribe(t, "a/+", func(topic string, payload []byte) { got <- topic + "=" + string(payload) })
	c := Connect(t, b.URL(), nil)
	if tok := c.Publish("a/b", 1, false, "hi"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case m := <-got:
		if m != "a/b=hi" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("inline subscriber got nothing")
	}
	echo := make(chan string, 1)
	Subscribe(t, c, "b/#", func(_ paho.Client, m paho.Message) { echo <- string(m.Payload()) })
	if err := b.Publish("b/c", []byte("back")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-echo:
		if m != "back" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client got nothing from the broker's publish")
	}
}
