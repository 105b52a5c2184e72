package verify

import (
	"fmt"
	"time"
)

// newExtraScheme builds the schemes of the provider-coverage set, each
// defined in its own file.
func newExtraScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	switch cfg.Scheme {
	case SchemeSlack:
		return newSlackScheme(cfg, tolerance)
	case SchemeShopify:
		return newShopifyScheme(cfg)
	case SchemeTwilio:
		return newTwilioScheme(cfg)
	case SchemePaddle:
		return newPaddleScheme(cfg, tolerance)
	case SchemeLinear:
		return newLinearScheme(cfg, tolerance)
	case SchemeIntercom:
		return newIntercomScheme(cfg)
	case SchemeZoom:
		return newZoomScheme(cfg, tolerance)
	case SchemeSquare:
		return newSquareScheme(cfg)
	case SchemeSendGrid:
		return newSendGridScheme(cfg, tolerance)
	case SchemePagerDuty:
		return newPagerDutyScheme(cfg)
	case SchemeDiscord:
		return newDiscordScheme(cfg, tolerance)
	case SchemeGitLab:
		return newGitLabScheme(cfg)
	case SchemeHMAC:
		return newHMACScheme(cfg, tolerance)
	}
	return nil, fmt.Errorf("unknown scheme %q", cfg.Scheme)
}
