// Package browser holds the live page's browser test: TestPageInChromium
// loads [github.com/moirai-go/moirai/debugpage] in headless Chromium after a
// real cancellation and checks what a person would see. It lives in the lab
// module so that the browser driver it needs (chromedp) is never in the
// library's module graph. It skips without Chromium, except under CI
// (scripts/install-chromium.sh installs Debian's).
package browser
