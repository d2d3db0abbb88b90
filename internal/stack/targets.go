package stack

import "fmt"

// Topic is an AWS::SNS::Topic's properties, as far as Outflow uses them.
type Topic struct {
	FifoTopic bool
	// KmsMasterKeyId is the customer key with KmsKeyArn, else SNS's AWS
	// managed key (alias/aws/sns).
	KmsMasterKeyId string
}

// Topics decodes every AWS::SNS::Topic, by logical name.
func (t *Template) Topics() (map[string]Topic, error) {
	out := map[string]Topic{}
	for _, name := range t.OfType("AWS::SNS::Topic") {
		var tp Topic
		if err := t.Resources[name].Decode(&tp); err != nil {
			return nil, fmt.Errorf("topic %s: %w", name, err)
		}
		out[name] = tp
	}
	return out, nil
}

// EventBus is an AWS::Events::EventBus's properties, as far as Outflow
// uses them.
type EventBus struct {
	Name string
	// KmsKeyIdentifier is the customer key with KmsKeyArn, else empty (an
	// AWS owned key).
	KmsKeyIdentifier string
	// DeadLetterConfig names the queue for events the bus accepted and
	// could not process (with a customer key: could not encrypt); nil
	// without one.
	DeadLetterConfig *struct{ Arn string }
}

// EventBuses decodes every AWS::Events::EventBus, by logical name.
func (t *Template) EventBuses() (map[string]EventBus, error) {
	out := map[string]EventBus{}
	for _, name := range t.OfType("AWS::Events::EventBus") {
		var b EventBus
		if err := t.Resources[name].Decode(&b); err != nil {
			return nil, fmt.Errorf("event bus %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}
