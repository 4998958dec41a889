package secrets

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/term"
)

// PassphraseEnv is the environment variable that holds the encrypted vault's
// passphrase (CI, scripts).
const PassphraseEnv = "AIRLOCK_VAULT_PASSPHRASE"

// PassphraseSource returns an Options.Passphrase that takes the passphrase from
// PassphraseEnv in getenv, else, when prompt is true, asks for it on the
// controlling terminal (/dev/tty) without echo, else fails saying how to
// provide it.
func PassphraseSource(getenv func(string) (string, bool), prompt bool) func(confirm bool) (string, error) {
	return func(confirm bool) (string, error) {
		if p, ok := getenv(PassphraseEnv); ok {
			if p == "" {
				return "", errors.New(PassphraseEnv + " is set but empty")
			}
			return p, nil
		}
		if !prompt {
			return "", ErrNoPassphrase
		}
		return PromptTTY(confirm)
	}
}

// PromptTTY asks for the passphrase on /dev/tty with echo off; with confirm it
// asks twice and requires both to match. Without a terminal it returns
// ErrNoPassphrase.
func PromptTTY(confirm bool) (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", ErrNoPassphrase
	}
	defer tty.Close()
	fd := int(tty.Fd())
	if !term.IsTerminal(fd) {
		return "", ErrNoPassphrase
	}
	ask := func(prompt string) (string, error) {
		fmt.Fprint(tty, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(tty)
		if err != nil {
			return "", fmt.Errorf("cannot read the vault passphrase: %w", err)
		}
		return string(b), nil
	}
	if !confirm {
		return ask("Vault passphrase: ")
	}
	fmt.Fprintln(tty, "Creating the airlock vault: choose a passphrase (it cannot be recovered).")
	p, err := ask("New vault passphrase: ")
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", errors.New("the vault passphrase is empty")
	}
	again, err := ask("Repeat the passphrase: ")
	if err != nil {
		return "", err
	}
	if again != p {
		return "", errors.New("the passphrases do not match")
	}
	return p, nil
}
