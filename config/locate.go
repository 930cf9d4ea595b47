package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Names of the places Locate looks at (docs/configuration.md).
const (
	// EnvConfigPath names the environment variable holding a config path.
	EnvConfigPath = "MCP_PROXY_CONFIG"
	// LocalConfigFile is looked for in the working directory.
	LocalConfigFile = "mcp-proxy.yaml"
)

// Locate finds the config file: flagPath (--config) when set, else
// $MCP_PROXY_CONFIG when set, else ./mcp-proxy.yaml, else
// $XDG_CONFIG_HOME/mcp-proxy/config.yaml (~/.config/mcp-proxy/config.yaml
// when $XDG_CONFIG_HOME is unset or relative). A path given by the flag or
// the variable must exist: Locate does not fall back from a path the user
// named. lookupEnv nil means os.LookupEnv; fileExists nil means "is a
// regular file, following symlinks". The error matches ErrNoConfig and
// lists every place tried.
func Locate(flagPath string, lookupEnv func(string) (string, bool), fileExists func(string) bool) (string, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if fileExists == nil {
		fileExists = isRegularFile
	}
	if flagPath != "" {
		if fileExists(flagPath) {
			return flagPath, nil
		}
		return "", fmt.Errorf("%w: --config %s does not exist", ErrNoConfig, flagPath)
	}
	if p, ok := lookupEnv(EnvConfigPath); ok && p != "" {
		if fileExists(p) {
			return p, nil
		}
		return "", fmt.Errorf("%w: $%s=%s does not exist", ErrNoConfig, EnvConfigPath, p)
	}
	tried := []string{LocalConfigFile}
	if fileExists(LocalConfigFile) {
		return LocalConfigFile, nil
	}
	if user := userConfigPath(lookupEnv); user != "" {
		tried = append(tried, user)
		if fileExists(user) {
			return user, nil
		}
	}
	return "", fmt.Errorf("%w; tried %s (or pass --config, or set $%s)", ErrNoConfig, strings.Join(tried, ", "), EnvConfigPath)
}

// userConfigPath is $XDG_CONFIG_HOME/mcp-proxy/config.yaml, else
// ~/.config/mcp-proxy/config.yaml; "" when no home directory is known.
func userConfigPath(lookupEnv func(string) (string, bool)) string {
	if v, ok := lookupEnv("XDG_CONFIG_HOME"); ok && filepath.IsAbs(v) {
		return filepath.Join(v, "mcp-proxy", "config.yaml")
	}
	home := homeDir(lookupEnv)
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "mcp-proxy", "config.yaml")
}

func isRegularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
