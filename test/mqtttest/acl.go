package mqtttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ACLUser is a user of a broker started by StartMosquittoACL.
type ACLUser struct {
	// Name and Password are the user's credentials.
	Name, Password string
	// Topics are the user's ACL lines, such as "topic write devices/+/cmd"
	// or "topic read devices/+/reply". A user without lines may connect
	// and do nothing else.
	Topics []string
}

// StartMosquittoACL starts a private broker whose one listener admits only
// users, by password, and lets each publish and subscribe only where its
// ACL lines allow. Mosquitto drops a publish the ACL refuses without
// telling the publisher: MQTT 3.1.1 has no way to say so. The password file
// is made with mosquitto_passwd, looked up beside bin and then on PATH.
func StartMosquittoACL(t testing.TB, bin string, users []ACLUser) *Mosquitto {
	t.Helper()
	passwd := filepath.Join(filepath.Dir(bin), "mosquitto_passwd")
	if _, err := os.Stat(passwd); err != nil {
		if passwd, err = exec.LookPath("mosquitto_passwd"); err != nil {
			t.Fatalf("mqtttest: mosquitto_passwd not found beside %s or on PATH: %v", bin, err)
		}
	}
	m := newMosquitto(t, bin, func(dir string) string {
		pwFile, aclFile := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
		if err := os.WriteFile(pwFile, nil, 0o600); err != nil {
			t.Fatalf("mqtttest: password file: %v", err)
		}
		var acl strings.Builder
		for _, u := range users {
			if out, err := exec.Command(passwd, "-b", pwFile, u.Name, u.Password).CombinedOutput(); err != nil {
				t.Fatalf("mqtttest: mosquitto_passwd %s: %v\n%s", u.Name, err, out)
			}
			acl.WriteString("user " + u.Name + "\n")
			for _, line := range u.Topics {
				acl.WriteString(line + "\n")
			}
		}
		if err := os.WriteFile(aclFile, []byte(acl.String()), 0o600); err != nil {
			t.Fatalf("mqtttest: acl file: %v", err)
		}
		return "allow_anonymous false\npassword_file " + pwFile + "\nacl_file " + aclFile + "\n"
	})
	m.Start(t)
	return m
}
